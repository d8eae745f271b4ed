process JAXRNA_TARGETS_MERGE {
    tag "$meta.id"
    label 'process_single'

    conda "${moduleDir}/environment.yml"

    input:
    tuple val(meta), path(reports, stageAs: 'chunks/*'), path(manifest), path(mirnas)

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
    jaxrna targets-merge \\
        $args \\
        --manifest $manifest \\
        --mirnas $mirnas \\
        --output ${prefix}.targets.${suffix} \\
        $reports
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
