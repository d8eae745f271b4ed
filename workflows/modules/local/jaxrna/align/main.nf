process JAXRNA_ALIGN {
    tag "$meta.id"
    label 'process_medium'
    label 'process_gpu'

    conda "${moduleDir}/environment.yml"

    input:
    tuple val(meta), path(queries), path(targets)

    output:
    tuple val(meta), path("*.align.{txt,tsv,json}"), emit: align
    tuple val("${task.process}"), val('jaxrna'), eval("jaxrna --version | sed 's/^jaxrna //'"), emit: versions_jaxrna, topic: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args   = task.ext.args   ?: ''
    def prefix = task.ext.prefix ?: "${meta.id}"
    def suffix = task.ext.suffix ?: 'txt'
    """
    jaxrna align \\
        $args \\
        --output ${prefix}.align.${suffix} \\
        $queries \\
        $targets
    """

    stub:
    def args   = task.ext.args   ?: ''
    def prefix = task.ext.prefix ?: "${meta.id}"
    def suffix = task.ext.suffix ?: 'txt'
    """
    echo "$args" > /dev/null
    touch ${prefix}.align.${suffix}
    """
}
