"""``python -m stages.retrieve_expansion``: the expansion family's former entry point, now
``python -m stages.retrieve_method --method hyde|query2doc|lamer``
(see :mod:`stages.retrieve_method`)."""

from stages.retrieve_method import family_stage

app, main = family_stage("expansion")

if __name__ == "__main__":
    app()
