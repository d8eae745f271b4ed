process JAXRNA_TARGETS_SPLIT {
    tag "$meta.id"
    label 'process_single'

    conda "${moduleDir}/environment.yml"

    input:
    tuple val(meta), path(targets)

    output:
    tuple val(meta), path("*.chunk*.fa") , emit: chunks
    tuple val(meta), path("*.chunks.tsv"), emit: manifest
    tuple val("${task.process}"), val('jaxrna'), eval("jaxrna --version | sed 's/^jaxrna //'"), emit: versions_jaxrna, topic: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args   = task.ext.args   ?: ''
    def prefix = task.ext.prefix ?: "${meta.id}"
    """
    jaxrna targets-split \\
        $args \\
        --prefix ${prefix} \\
        $targets
    """

    stub:
    def args   = task.ext.args   ?: ''
    def prefix = task.ext.prefix ?: "${meta.id}"
    """
    echo "$args" > /dev/null
    touch ${prefix}.chunk000001.fa
    printf '#file\\trecords\\tnt\\n${prefix}.chunk000001.fa\\t0\\t0\\n' > ${prefix}.chunks.tsv
    """
}
