"""mlperf-bert: reproduce tinygrad's MLPerf Training BERT submission as a Snakemake workflow."""
__version__ = "0.1.0"
