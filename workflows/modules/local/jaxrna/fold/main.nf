process JAXRNA_FOLD {
    tag "$meta.id"
    label 'process_medium'
    label 'process_gpu'

    conda "${moduleDir}/environment.yml"

    input:
    tuple val(meta), path(fasta)

    output:
    tuple val(meta), path("*.fold.{dbn,ct,bpseq,tsv,json}"), emit: fold
    tuple val("${task.process}"), val('jaxrna'), eval("jaxrna --version | sed 's/^jaxrna //'"), emit: versions_jaxrna, topic: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args   = task.ext.args   ?: ''
    def prefix = task.ext.prefix ?: "${meta.id}"
    def suffix = task.ext.suffix ?: 'dbn'
    """
    jaxrna fold \\
        $args \\
        --output ${prefix}.fold.${suffix} \\
        $fasta
    """

    stub:
    def args   = task.ext.args   ?: ''
    def prefix = task.ext.prefix ?: "${meta.id}"
    def suffix = task.ext.suffix ?: 'dbn'
    """
    echo "$args" > /dev/null
    touch ${prefix}.fold.${suffix}
    """
}
