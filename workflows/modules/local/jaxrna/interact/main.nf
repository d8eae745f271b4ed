process JAXRNA_INTERACT {
    tag "$meta.id"
    label 'process_medium'
    label 'process_gpu'

    conda "${moduleDir}/environment.yml"

    input:
    tuple val(meta), path(strand1), path(strand2)

    output:
    tuple val(meta), path("*.interact.{tsv,dbn,json}"), emit: interact
    tuple val(meta), path("*.windows.tsv")            , emit: windows, optional: true
    tuple val("${task.process}"), val('jaxrna'), eval("jaxrna --version | sed 's/^jaxrna //'"), emit: versions_jaxrna, topic: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args    = task.ext.args   ?: ''
    def prefix  = task.ext.prefix ?: "${meta.id}"
    def suffix  = task.ext.suffix ?: 'tsv'
    def windows = task.ext.all_windows ? "--all-windows ${prefix}.windows.tsv" : ''
    """
    jaxrna interact \\
        $args \\
        $windows \\
        --output ${prefix}.interact.${suffix} \\
        $strand1 \\
        $strand2
    """

    stub:
    def args    = task.ext.args   ?: ''
    def prefix  = task.ext.prefix ?: "${meta.id}"
    def suffix  = task.ext.suffix ?: 'tsv'
    def windows = task.ext.all_windows ? "${prefix}.windows.tsv" : ''
    """
    echo "$args" > /dev/null
    touch ${prefix}.interact.${suffix} $windows
    """
}
