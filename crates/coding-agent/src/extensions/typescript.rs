//! TypeScript extensions: transpiled to JavaScript in-process with the oxc parser and
//! transformer (types stripped, enums / namespaces / parameter properties lowered), with an
//! inline source map so Node's stack traces point at the `.ts` source. Node 20 has no type
//! stripping of its own; the host asks for each `.ts` module it loads (host.mjs load hook).

use oxc::allocator::Allocator;
use oxc::codegen::{Codegen, CodegenOptions};
use oxc::diagnostics::OxcDiagnostic;
use oxc::parser::Parser;
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;
use oxc::transformer::{TransformOptions, Transformer};
use std::path::Path;

/// `line:column` (1-based) of byte `offset` in `source`.
fn position(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// `<path>:<line>:<col>: <message>` for the first diagnostic.
fn describe(path: &Path, source: &str, errors: &[OxcDiagnostic]) -> String {
    let Some(first) = errors.first() else {
        return format!("{}: cannot transpile", path.display());
    };
    let offset = first
        .labels
        .first()
        .map(oxc::diagnostics::LabeledSpan::offset)
        .unwrap_or_default();
    let (line, col) = position(source, offset as usize);
    format!("{}:{line}:{col}: {}", path.display(), first.message)
}

/// Transpiles TypeScript `source` (of file `path`, whose extension picks `.ts` / `.mts` /
/// `.cts` / `.tsx`) to an ES module with an inline source map. Errors name the file, the
/// 1-based line and column, and the parser's or transformer's message.
pub fn transpile(path: &Path, source: &str) -> Result<String, String> {
    let allocator = Allocator::default();
    let source_type = SourceType::from_path(path)
        .unwrap_or_else(|_| SourceType::ts())
        .with_module(true);
    let parsed = Parser::new(&allocator, source, source_type).parse();
    if parsed.diagnostics.has_errors() {
        let errors: Vec<OxcDiagnostic> = parsed.diagnostics.errors().cloned().collect();
        return Err(describe(path, source, &errors));
    }
    let mut program = parsed.program;
    let semantic = SemanticBuilder::new()
        .with_excess_capacity(2.0)
        .with_enum_eval(true)
        .build(&program);
    let scoping = semantic.semantic.into_scoping();
    let options = TransformOptions::default();
    let transformed =
        Transformer::new(&allocator, path, &options).build_with_scoping(scoping, &mut program);
    if transformed.diagnostics.has_errors() {
        let errors: Vec<OxcDiagnostic> = transformed.diagnostics.errors().cloned().collect();
        return Err(describe(path, source, &errors));
    }
    let out = Codegen::new()
        .with_options(CodegenOptions {
            source_map_path: Some(path.to_path_buf()),
            ..CodegenOptions::default()
        })
        .build(&program);
    Ok(match out.map {
        Some(map) => format!("{}\n//# sourceMappingURL={}\n", out.code, map.to_data_url()),
        None => out.code,
    })
}

/// Reads and transpiles the file at `path`. A panic inside the transpiler becomes an error
/// naming the file (it must not take the host's reader down).
pub fn transpile_file(path: &Path) -> Result<String, String> {
    let source = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    std::panic::catch_unwind(|| transpile(path, &source)).unwrap_or_else(|p| {
        Err(format!(
            "{}: the TypeScript transpiler failed: {}",
            path.display(),
            crate::tasks::panic_text(p.as_ref())
        ))
    })
}
