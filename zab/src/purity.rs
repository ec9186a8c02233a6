//! The core must stay deterministic: this test fails if a ZAB source file
//! mentions an I/O, clock or randomness API.

const SOURCES: &[(&str, &str)] = &[
    ("codec.rs", include_str!("codec.rs")),
    ("election.rs", include_str!("election.rs")),
    ("history.rs", include_str!("history.rs")),
    ("leader.rs", include_str!("leader.rs")),
    ("leader/broadcast.rs", include_str!("leader/broadcast.rs")),
    ("learner.rs", include_str!("learner.rs")),
    ("message.rs", include_str!("message.rs")),
    ("lib.rs", include_str!("lib.rs")),
    ("peer.rs", include_str!("peer.rs")),
    ("types.rs", include_str!("types.rs")),
];

#[test]
fn the_core_does_no_io_and_reads_no_clock_or_randomness() {
    // Spelled in pieces so this file does not match itself.
    let forbidden = [
        ["tok", "io"].concat(),
        ["std::", "net"].concat(),
        ["std::", "fs"].concat(),
        ["std::", "thread"].concat(),
        ["Instant::", "now"].concat(),
        ["System", "Time"].concat(),
        ["rand", "::"].concat(),
        ["HashMap", ""].concat(), // iteration order is random per process
        ["HashSet", ""].concat(),
    ];
    for (file, text) in SOURCES {
        for word in &forbidden {
            assert!(
                !text.contains(word.as_str()),
                "zab/src/{file} mentions `{word}`"
            );
        }
    }
}
