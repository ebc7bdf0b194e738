"""The benchmark harness: competition timing, providers side by side, tables, files, plots."""
