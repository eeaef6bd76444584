"""``python -m stages.retrieve_rerank``: the rerank family's former entry point, now
``python -m stages.retrieve_method --method listwise|cross_encoder``
(see :mod:`stages.retrieve_method`)."""

from stages.retrieve_method import family_stage

app, main = family_stage("rerank", default_method="listwise")

if __name__ == "__main__":
    app()
