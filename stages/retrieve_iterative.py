"""``python -m stages.retrieve_iterative``: the iterative family's former entry point, now
``python -m stages.retrieve_method --method ircot|self_ask|s2g_rag|gear``
(see :mod:`stages.retrieve_method`)."""

from stages.retrieve_method import family_stage

app, main = family_stage("iterative")

if __name__ == "__main__":
    app()
