# An example workflow for ftfarm's Snakemake profile (docs/workflows.md):
# eight parts made, each squared on 2 slots of a node, summed on one GPU.
#
#   bin/ftfarm start -c config/local-gpus.json
#   FTFARM_CONFIG=$PWD/config/local-gpus.json snakemake \
#       --profile $PWD/scripts/snakemake/ftfarm -s $PWD/config/workflow.smk \
#       -d /tmp/wf
#   cat /tmp/wf/sum.txt       # 2706604
N = 8

rule all:
    input: "sum.txt"

rule part:
    output: "parts/{i}.txt"
    shell: "seq {wildcards.i} 100 > {output}"

rule square:
    input: "parts/{i}.txt"
    output: "squares/{i}.txt"
    threads: 2
    shell: "awk '{{print $1 * $1}}' {input} > {output}"

rule sum:
    input: expand("squares/{i}.txt", i=range(N))
    output: "sum.txt"
    resources: gpus=1
    shell:
        "cat {input} | awk '{{s += $1}} END {{print s}}' > {output}; "
        "echo GPU $CUDA_VISIBLE_DEVICES of $FTFARM_NODE > gpu.txt"
