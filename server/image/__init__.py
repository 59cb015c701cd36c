"""The metadata image: the state a metadata log (snapshots, batches, control records) replays
to, built by the same replay as the controller's. The controller loads itself with the
loader; the metadata shell and the test broker read the image."""
