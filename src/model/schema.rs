//! The JSON Schema of the `wirebench.run` document (`--json`, `--output`, `export --json`, the
//! `end` line of `--json-stream`), generated from the types that make it. The generated
//! schema is committed as `schema/wirebench.run.schema.json`, and a test fails when the types
//! and the file disagree, so a change of the document is a visible change of that file.

use crate::model::RunDocument;

/// Where the committed schema lives, from the crate's root.
pub const PATH: &str = "schema/wirebench.run.schema.json";

/// The schema of the run document, as pretty JSON with a final line end.
pub fn run_document() -> String {
    let schema = schemars::schema_for!(RunDocument);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `WIREBENCH_WRITE_SCHEMA=1 cargo test --lib schema` writes the file anew.
    #[test]
    fn the_committed_schema_is_the_one_the_types_make() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(PATH);
        let generated = run_document();
        if std::env::var_os("WIREBENCH_WRITE_SCHEMA").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{PATH} differs from the schema the types make: the run document changed. If that \
             is meant, regenerate it with WIREBENCH_WRITE_SCHEMA=1 cargo test --lib schema and \
             commit it (and bump SCHEMA_VERSION for an incompatible change)"
        );
    }
}
