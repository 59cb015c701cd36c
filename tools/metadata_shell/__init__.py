"""kraftwire's kafka-metadata-shell: the cluster metadata as a browsable tree."""
