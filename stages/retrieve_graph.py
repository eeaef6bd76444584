"""``python -m stages.retrieve_graph``: the graph family's former entry point, now
``python -m stages.retrieve_method --method hipporag2|catrag|proprag``
(see :mod:`stages.retrieve_method`)."""

from stages.retrieve_method import family_stage

app, main = family_stage("graph")

if __name__ == "__main__":
    app()
