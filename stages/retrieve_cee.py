"""``python -m stages.retrieve_cee``: the cee family's former entry point, now
``python -m stages.retrieve_method --method cee --variant V``
(see :mod:`stages.retrieve_method`)."""

from stages.retrieve_method import family_stage

app, main = family_stage("cee")

if __name__ == "__main__":
    app()
