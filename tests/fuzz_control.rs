//! Fuzzing the control plane for a bounded time: the codec in memory (any bytes, and mutations
//! of the seed corpus in tests/corpus/control/), then the server's admission path over
//! loopback (every seed and a few hundred mutations, each on its own connection). Neither may
//! panic, and the server must answer a well-behaved client afterwards with its threads and
//! descriptors back where they were.
//!
//! The corpus holds one file per conversation a client could open with: valid frames of each
//! message, refusals the server must give (wrong magic, huge batch, a pacing interval of
//! 1e300 ns), framing garbage and data-connection prefixes. The mutations flip, insert,
//! delete and truncate bytes of those, and rewrite the length prefix.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use common::proc::{held, peak_while, settle};
use common::{run_json, u, Server};
use wirebench::control::framing::read_frame;
use wirebench::control::protocol::{ClientMessage, ServerMessage};

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/control");
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("the corpus is in the repository")
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("corpus file"))
        })
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 20, "corpus has {} seeds", seeds.len());
    seeds
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
    /// Rewrites the first frame's length prefix.
    Length(u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Truncate),
        prop_oneof![0u32..64, any::<u32>()].prop_map(Mutation::Length),
    ]
}

fn mutate(seed: &[u8], ms: &[Mutation]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for m in ms {
        match *m {
            Mutation::Flip(i, x) if !b.is_empty() => {
                let i = i % b.len();
                b[i] ^= x;
            }
            Mutation::Insert(i, x) => {
                let i = i % (b.len() + 1);
                b.insert(i, x);
            }
            Mutation::Delete(i) if !b.is_empty() => {
                let i = i % b.len();
                b.remove(i);
            }
            Mutation::Truncate(i) => b.truncate(i % (b.len() + 1)),
            Mutation::Length(l) if b.len() >= 4 => b[..4].copy_from_slice(&l.to_be_bytes()),
            _ => {}
        }
    }
    b
}

/// Decodes every frame in `bytes` as both sides would, until one fails.
fn decode_all(bytes: &[u8]) {
    let mut r = bytes;
    while read_frame::<ClientMessage>(&mut r).is_ok() {}
    let mut r = bytes;
    while read_frame::<ServerMessage>(&mut r).is_ok() {}
}

fn cases() -> Vec<Vec<u8>> {
    let seeds = corpus();
    let strategy = (0..seeds.len(), prop::collection::vec(mutation(), 1..6));
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    (0..300)
        .map(|_| {
            let (i, ms) = strategy.new_tree(&mut runner).unwrap().current();
            mutate(&seeds[i].1, &ms)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_codec_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        decode_all(&bytes);
    }

    #[test]
    fn the_codec_takes_any_mutation_of_the_corpus(
        i in 0usize..1000,
        ms in prop::collection::vec(mutation(), 1..8),
    ) {
        let seeds = corpus();
        decode_all(&mutate(&seeds[i % seeds.len()].1, &ms));
    }
}

#[test]
fn every_seed_of_the_corpus_decodes_or_is_refused_without_panicking() {
    for (name, bytes) in corpus() {
        let outcome = std::panic::catch_unwind(|| decode_all(&bytes));
        assert!(outcome.is_ok(), "seed {name} panicked the codec");
    }
}

/// Sends `bytes` on a connection of its own, says it has no more, and reads whatever the
/// server answers until it closes (or 20 s pass: a server that holds a connection open
/// after the client has finished sending must still close it once its deadlines pass).
fn attack(addr: &str, bytes: &[u8]) {
    let Ok(mut c) = TcpStream::connect(addr) else {
        return;
    };
    let _ = c.set_write_timeout(Some(Duration::from_secs(5)));
    let _ = c.write_all(bytes);
    let _ = c.shutdown(Shutdown::Write);
    let _ = c.set_read_timeout(Some(Duration::from_secs(20)));
    let mut sink = Vec::new();
    let _ = c.read_to_end(&mut sink);
}

#[test]
fn the_admission_path_survives_the_corpus_and_its_mutations() {
    let server = Server::start(&[]);
    let pid = server.child.id();
    // One good test first, so that whatever the server makes once (its environment capture,
    // lazily started threads) is in the baseline.
    run_json(&["pingpong", "--to", &server.addr, "-n", "20"]);
    let baseline = held(pid);

    let mut inputs: Vec<Vec<u8>> = corpus().into_iter().map(|(_, b)| b).collect();
    inputs.extend(cases());
    let total = inputs.len();
    let ((), peak) = peak_while(pid, || {
        // 32 at a time: concurrent enough to overlap sessions, few enough for 2 CPUs.
        for chunk in inputs.chunks(32) {
            std::thread::scope(|s| {
                for bytes in chunk {
                    let addr = server.addr.as_str();
                    s.spawn(move || attack(addr, bytes));
                }
            });
        }
    });
    assert!(
        server_alive(&server),
        "the server died during {total} hostile connections"
    );
    let v = run_json(&["pingpong", "--to", &server.addr, "-n", "50"]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 50);
    // Settled once the server has ended every session: waited for up to a minute (the hang
    // guard), then held to the baseline exactly.
    let settled = settle(pid, baseline, common::FINISH);
    eprintln!(
        "fuzz: {total} connections; threads {} -> peak {} -> {}, descriptors {} -> peak {} -> {}, RSS {} -> peak {} -> {} KiB",
        baseline.threads, peak.threads, settled.threads, baseline.fds, peak.fds, settled.fds,
        baseline.rss_kib, peak.rss_kib, settled.rss_kib
    );
    assert!(
        settled.threads <= baseline.threads,
        "threads {settled:?} vs {baseline:?}"
    );
    assert!(
        settled.fds <= baseline.fds,
        "descriptors {settled:?} vs {baseline:?}"
    );
}

fn server_alive(server: &Server) -> bool {
    std::fs::metadata(format!("/proc/{}/status", server.child.id())).is_ok()
        && std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
            .is_ok_and(|s| !s.contains("State:\tZ"))
}
