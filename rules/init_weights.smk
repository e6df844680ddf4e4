# The initial weights: MLPerf's TensorFlow checkpoint model.ckpt-28252 -> safetensors with Google's variable names
# (dense kernels stay (in, out)); optimizer slots are skipped. The only stage that needs TensorFlow.


rule convert_init_weights:
    input:
        data=B("download/model.ckpt-28252.data-00000-of-00001"),
        index=B("download/model.ckpt-28252.index"),
        meta=B("download/model.ckpt-28252.meta"),
        bert_config=B("download/bert_config.json"),
    output:
        B("checkpoint/model.safetensors"),
    params:
        space_check=uncompared(PLAN.space_check),
    log:
        B("logs/convert_init_weights/convert_init_weights.log"),
    conda:
        "../envs/init_weights.yaml"
    resources:
        # measured: 0.88 GB peak RSS for a BERT-large checkpoint (TensorFlow + the largest variable; the
        # output is streamed tensor by tensor), with headroom for other TensorFlow builds
        mem_mb=1500,
    script:
        "../workflow/scripts/convert_init_weights.py"
