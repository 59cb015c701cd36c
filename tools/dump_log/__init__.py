"""kraftwire's kafka-dump-log: the batches and decoded records of metadata log files."""

from tools.dump_log.dump import Options, dump_file

__all__ = ["Options", "dump_file"]
