"""``python -m stages.retrieve_evireform``: the evireform family's former entry point, now
``python -m stages.retrieve_method --method evireform --variant V``
(see :mod:`stages.retrieve_method`)."""

from stages.retrieve_method import family_stage

app, main = family_stage("evireform")

if __name__ == "__main__":
    app()
