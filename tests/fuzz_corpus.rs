//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the
//! same invariant checks the libFuzzer targets run, so a normal
//! `cargo test` guards them on stable without a fuzzer.
//!
//! To grow the corpus, fuzz on nightly (`cd fuzz && cargo +nightly fuzz run
//! <target>`), minimise it (`cargo +nightly fuzz cmin <target>`) and commit
//! the result; a crash found there is fixed in the parser and its input
//! committed under `fuzz/corpus/<target>/` with a name saying what it is.

#[path = "../fuzz/src/check/mod.rs"]
mod check;

use std::fs;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `target`'s corpus, in a stable order.
fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.expect("a readable corpus entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_committed_input_passes_its_targets_checks() {
    let mut broken = Vec::new();
    let mut replayed = 0;
    for (target, check) in check::TARGETS {
        let files = corpus(target);
        assert!(!files.is_empty(), "the corpus of {target} is empty");
        for file in files {
            let input = fs::read(&file).expect("a readable corpus file");
            // The panic message (printed by the default hook) says which
            // invariant broke; this names the input.
            if std::panic::catch_unwind(|| check(&input)).is_err() {
                broken.push(format!("{target}: {} {input:?}", file.display()));
            }
            replayed += 1;
        }
    }
    assert!(
        broken.is_empty(),
        "{} of {replayed} inputs break an invariant:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn every_fuzz_target_has_a_check_and_a_corpus() {
    let mut targets: Vec<String> = fs::read_dir(fuzz_dir().join("fuzz_targets"))
        .expect("fuzz/fuzz_targets")
        .map(|entry| entry.expect("an entry").path())
        .filter_map(|path| Some(path.file_stem()?.to_str()?.to_owned()))
        .collect();
    targets.sort();
    let mut checked: Vec<String> = check::TARGETS
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .collect();
    checked.sort();
    assert_eq!(targets, checked);

    let mut corpora: Vec<String> = fs::read_dir(fuzz_dir().join("corpus"))
        .expect("fuzz/corpus")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    corpora.sort();
    assert_eq!(corpora, checked);
}
