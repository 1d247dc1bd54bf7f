"""The sensors that turn the source folder into partitions and batched runs."""
