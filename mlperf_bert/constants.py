"""Constants shared by more than one wing. Each is defined here once."""

# The last MLPerf Training ruleset with BERT (BERT is not in 5.1). The logs, the audit and the package use it.
RULESET = "5.0.0"

# The seven features of a pretraining instance, in the shard's and the .npz dump's order (as the MLPerf
# TFRecords name them). The trainer's jitted steps and BertForPretraining.forward (the first four) take them
# positionally in this order.
FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
            "next_sentence_labels")

# MLPerf's eval set size for BERT (pick_eval_samples.py's default).
EVAL_SAMPLES = 10000
