#!/usr/bin/env nextflow
/*
 * jaxrna pipelines: RNA folding, alignment, miRNA target scanning and RNA-RNA interaction on
 * GPUs, one GPU per task, on a laptop, a SLURM cluster or a cloud batch service.
 *
 *   nextflow run workflows/main.nf -profile test,gpu
 *   nextflow run workflows/main.nf --mode fold --input 'seqs/*.fa' -profile gpu,docker
 *   nextflow run workflows/main.nf -params-file workflows/params/targets.yml -profile slurm,gpu
 *
 * --mode picks the pipeline(s): fold, align, targets, interact, or a comma-separated list.
 * The named workflows FOLD, ALIGN, TARGETS and INTERACT can also be included from other
 * pipelines; each takes channels of [ meta, file(s) ] tuples. See README.md.
 */

include { validateParameters   } from 'plugin/nf-schema'

include { JAXRNA_FOLD          } from './modules/local/jaxrna/fold/main'
include { JAXRNA_ALIGN         } from './modules/local/jaxrna/align/main'
include { JAXRNA_TARGETS       } from './modules/local/jaxrna/targets/main'
include { JAXRNA_TARGETS_SPLIT } from './modules/local/jaxrna/targets_split/main'
include { JAXRNA_TARGETS_MERGE } from './modules/local/jaxrna/targets_merge/main'
include { JAXRNA_INTERACT      } from './modules/local/jaxrna/interact/main'

/*
 * Fold every record of every FASTA file.
 */
workflow FOLD {
    take:
    ch_fasta        // channel: [ val(meta), path(fasta) ]

    main:
    JAXRNA_FOLD ( ch_fasta )

    emit:
    fold = JAXRNA_FOLD.out.fold       // channel: [ val(meta), path(structures) ]
}

/*
 * Align queries against targets (all pairs, or pairwise with --align_pairs zip).
 */
workflow ALIGN {
    take:
    ch_input        // channel: [ val(meta), path(queries), path(targets) ]

    main:
    JAXRNA_ALIGN ( ch_input )

    emit:
    align = JAXRNA_ALIGN.out.align    // channel: [ val(meta), path(alignments) ]
}

/*
 * Scan miRNAs against targets. With --targets_chunk_nt or --targets_chunk_records the target
 * file is split into chunks scanned in parallel (one GPU each), and the chunk reports are merged
 * into exactly the report one `jaxrna targets` run over the whole file writes.
 */
workflow TARGETS {
    take:
    ch_input        // channel: [ val(meta), path(mirnas), path(targets) ]

    main:
    if (params.targets_chunk_nt || params.targets_chunk_records) {
        ch_mirnas = ch_input.map { meta, mirnas, targets -> [ meta.id, mirnas ] }

        JAXRNA_TARGETS_SPLIT ( ch_input.map { meta, mirnas, targets -> [ meta, targets ] } )

        // one task per chunk; the chunk's name (PREFIX.chunkNNNNNN) names its report
        ch_chunks = JAXRNA_TARGETS_SPLIT.out.chunks
            .flatMap { meta, chunks ->
                (chunks instanceof List ? chunks : [ chunks ]).collect { chunk ->
                    [ meta.id, meta + [ chunk: chunk.baseName ], chunk ]
                }
            }
            .combine ( ch_mirnas, by: 0 )
            .map { id, meta, chunk, mirnas -> [ meta, mirnas, chunk ] }

        JAXRNA_TARGETS ( ch_chunks )

        ch_merge = JAXRNA_TARGETS_SPLIT.out.manifest
            .map { meta, manifest -> [ meta.id, meta, manifest ] }
            .join ( ch_mirnas )
            .join ( JAXRNA_TARGETS.out.targets.map { meta, report -> [ meta.id, report ] }.groupTuple() )
            .map { id, meta, manifest, mirnas, reports -> [ meta, reports, manifest, mirnas ] }

        JAXRNA_TARGETS_MERGE ( ch_merge )
        ch_targets = JAXRNA_TARGETS_MERGE.out.targets
    } else {
        JAXRNA_TARGETS ( ch_input )
        ch_targets = JAXRNA_TARGETS.out.targets
    }

    emit:
    targets = ch_targets              // channel: [ val(meta), path(report) ]
}

/*
 * Joint secondary structures of strand-1 x strand-2 records (BPMax).
 */
workflow INTERACT {
    take:
    ch_input        // channel: [ val(meta), path(strand1), path(strand2) ]

    main:
    JAXRNA_INTERACT ( ch_input )

    emit:
    interact = JAXRNA_INTERACT.out.interact   // channel: [ val(meta), path(structures) ]
    windows  = JAXRNA_INTERACT.out.windows    // channel: [ val(meta), path(windows) ]
}

def required(name) {
    if (!params[name]) {
        error "--${name} is required for --mode ${params.mode}"
    }
    return file(params[name], checkIfExists: true)
}

def runId(path) {
    return params.run_id ?: path.simpleName
}

workflow {
    main:
    if (params.validate_params) {
        validateParameters()
    }
    def modes = params.mode.toString().tokenize(',')*.trim()
    def unknown = modes - [ 'fold', 'align', 'targets', 'interact' ]
    if (!modes || unknown) {
        error "Unknown --mode '${params.mode}': use fold, align, targets, interact or a comma-separated list"
    }

    if ('fold' in modes) {
        if (!params.input) {
            error "--input is required for --mode fold"
        }
        ch_fold = channel.fromPath(params.input, checkIfExists: true)
            .map { fasta -> [ [ id: fasta.simpleName ], fasta ] }
        FOLD ( ch_fold )
    }
    if ('align' in modes) {
        def queries = required('align_queries')
        def targets = required('align_targets')
        ALIGN ( channel.of( [ [ id: runId(queries) ], queries, targets ] ) )
    }
    if ('targets' in modes) {
        def mirnas  = required('mirnas')
        def targets = required('targets')
        TARGETS ( channel.of( [ [ id: runId(targets) ], mirnas, targets ] ) )
    }
    if ('interact' in modes) {
        def strand1 = required('strand1')
        def strand2 = required('strand2')
        INTERACT ( channel.of( [ [ id: runId(strand1) ], strand1, strand2 ] ) )
    }

    // Software versions of every task, from the modules' `versions` topic
    channel.topic('versions')
        .unique()
        .map { process, tool, version -> "${process.tokenize(':').last()}\t${tool}\t${version}" }
        .collectFile(
            name: 'software_versions.tsv', storeDir: "${params.outdir}/pipeline_info",
            sort: true, newLine: true, seed: "process\ttool\tversion"
        )
}
