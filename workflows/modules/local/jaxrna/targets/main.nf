process JAXRNA_TARGETS {
    tag "$meta.id"
    label 'process_medium'
    label 'process_gpu'

    conda "${moduleDir}/environment.yml"

    input:
    tuple val(meta), path(mirnas), path(targets)

    output:
    tuple val(meta), path("*.targets.{txt,tsv,json}"), emit: targets
    tuple val("${task.process}"), val('jaxrna'), eval("jaxrna --version | sed 's/^jaxrna //'"), emit: versions_jaxrna, topic: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args   = task.ext.args   ?: ''
    def prefix = task.ext.prefix ?: "${meta.id}"
    def suffix = task.ext.suffix ?: 'txt'
    """
    jaxrna targets \\
        $args \\
        --output ${prefix}.targets.${suffix} \\
        $mirnas \\
        $targets
    """

    stub:
    def args   = task.ext.args   ?: ''
    def prefix = task.ext.prefix ?: "${meta.id}"
    def suffix = task.ext.suffix ?: 'txt'
    """
    echo "$args" > /dev/null
    touch ${prefix}.targets.${suffix}
    """
}
