// Parse Groovy sources with Groovy's own parser, as Nextflow does before its own checks: each
// file is compiled to the CONVERSION phase (source -> parse tree -> AST), which catches every
// syntax error (unbalanced braces, brackets or quotes, a malformed GString, a stray operator)
// and nothing that depends on Nextflow's classes, which are not on this class path.
//
//   groovy tests/groovy/parse.groovy workflows/main.nf workflows/nextflow.config ...
//
// Prints "ok PATH" or "FAIL PATH: message" per file; exit status 1 if any failed.

import org.codehaus.groovy.control.CompilationFailedException
import org.codehaus.groovy.control.CompilationUnit
import org.codehaus.groovy.control.CompilerConfiguration
import org.codehaus.groovy.control.Phases

int failed = 0
println "groovy ${GroovySystem.version}"
args.each { path ->
    def unit = new CompilationUnit(new CompilerConfiguration())
    unit.addSource(new File(path))
    try {
        unit.compile(Phases.CONVERSION)
        println "ok ${path}"
    } catch (CompilationFailedException e) {
        failed++
        println "FAIL ${path}: ${e.message.replace('\n', ' | ')}"
    }
}
System.exit(failed ? 1 : 0)
