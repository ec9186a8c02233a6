//! Four-letter words asked the way operators and health probes ask them
//! (ZooKeeper Administrator's Guide, "The Four Letter Words": "You issue
//! the commands to ZooKeeper via telnet or nc, at the client port"):
//! `echo ruok | nc HOST PORT` sends the word and a newline, and Kubernetes
//! probes do the same with `nc -w T` or `socat`. Every word is answered,
//! whatever follows it on the connection, by every member, every time, on
//! Apache ZooKeeper and on wazoo alike.
//!
//! The failure these pin: a server that closes its socket with the newline
//! still unread makes the kernel send a reset, which can discard the answer
//! before the client reads it.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Target;
use wazoo_testkit::Flavor;

on_both!(a_word_is_answered_whatever_follows_it);

// Only wazoo is held to "every probe answered": Apache ZooKeeper 3.8 itself
// loses some (its NIO server also closes a socket with the newline unread;
// in one run here it lost 6 of 68 probes standalone and 24 of 204 on three
// members, `ruok` among them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_word_is_answered_through_nc_and_socat_by_a_standalone_member() {
    every_word_is_answered_through_nc_and_socat(Target {
        flavor: Flavor::Wazoo,
        ensemble: false,
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_word_is_answered_through_nc_and_socat_by_every_ensemble_member() {
    every_word_is_answered_through_nc_and_socat(Target {
        flavor: Flavor::Wazoo,
        ensemble: true,
    })
    .await
}

/// ZooKeeper 3.8's words that take no argument (`stmk` reads a mask
/// after the word), and wazoo's own `recp` on wazoo.
fn words(flavor: Flavor) -> Vec<&'static str> {
    let mut words = vec![
        "conf", "cons", "crst", "dump", "envi", "gtmk", "ruok", "srst", "srvr", "stat", "wchc",
        "wchp", "wchs", "mntr", "isro", "hash", "dirs",
    ];
    if flavor == Flavor::Wazoo {
        words.push("recp");
    }
    words
}

/// The members' client addresses of `target`'s shared server or ensemble.
fn addrs(target: Target) -> Vec<SocketAddr> {
    common::shared(target)
        .split(',')
        .map(|a| a.parse().expect("a connect string of host:port"))
        .collect()
}

/// Runs `sh -c script` with a bound on its time, and returns its stdout.
fn shell(script: &str) -> String {
    let out = Command::new("timeout")
        .args(["10", "sh", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{script}`: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The prefix ZooKeeper's answer to `word` starts with: enough to tell an
/// answer from nothing, or from another word's answer.
fn looks_answered(word: &str, answer: &str) -> bool {
    match word {
        "ruok" => answer == "imok",
        "isro" => answer == "rw" || answer == "ro",
        "mntr" => answer.starts_with("zk_version"),
        "srvr" | "stat" => answer.starts_with("Zookeeper version:"),
        "srst" => answer.starts_with("Server stats reset."),
        "crst" => answer.starts_with("Connection stats reset."),
        // Watches by connection and by path: none here, and ZooKeeper's
        // answer is then a lone newline.
        "wchc" | "wchp" => answer.ends_with('\n'),
        // ZooKeeper 3.8 lists the digests it logged, none on a fresh
        // server: an empty answer, and a closed connection.
        "hash" => true,
        _ => !answer.is_empty(),
    }
}

// Administrator's Guide, "The Four Letter Words".
async fn every_word_is_answered_through_nc_and_socat(target: Target) {
    let addrs = addrs(target);
    let words = words(target.flavor);
    let missed = tokio::task::spawn_blocking(move || {
        let mut missed = Vec::new();
        for round in 0..2 {
            for addr in &addrs {
                let (host, port) = (addr.ip(), addr.port());
                for word in &words {
                    let probes = [
                        format!("echo {word} | nc -w 2 {host} {port}"),
                        format!("echo {word} | socat -t 2 stdio tcp:{host}:{port}"),
                    ];
                    for probe in probes {
                        let answer = shell(&probe);
                        if !looks_answered(word, &answer) {
                            missed.push(format!("round {round}: `{probe}` gave {answer:?}"));
                        }
                    }
                }
            }
        }
        missed
    })
    .await
    .unwrap();
    assert!(
        missed.is_empty(),
        "{target}: {} probes got no answer:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

/// Sends `word`, then does `after` to the connection, then reads the
/// answer to the end.
fn ask(addr: SocketAddr, word: &str, after: impl FnOnce(&mut TcpStream)) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(word.as_bytes()).unwrap();
    after(&mut s);
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .unwrap_or_else(|e| panic!("`{word}`: reading the answer failed: {e}"));
    String::from_utf8_lossy(&answer).into_owned()
}

// Administrator's Guide, "The Four Letter Words".
async fn a_word_is_answered_whatever_follows_it(flavor: Flavor) {
    let addr = addrs(flavor.into())[0];
    let answers = tokio::task::spawn_blocking(move || {
        let mut answers = Vec::new();
        for _ in 0..5 {
            // A newline and more garbage behind the word, the write side
            // left open.
            answers.push(ask(addr, "ruok", |s| {
                let _ = s.write_all(b"\r\ngarbage that follows the word\n");
            }));
            // A half-close right after the word.
            answers.push(ask(addr, "ruok", |s| {
                s.shutdown(Shutdown::Write).unwrap();
            }));
            // A client that reads only after a while, with bytes unread
            // on the server's side all along.
            answers.push(ask(addr, "ruok", |s| {
                let _ = s.write_all(b"\n");
                std::thread::sleep(Duration::from_millis(300));
            }));
        }
        answers
    })
    .await
    .unwrap();
    for a in answers {
        assert_eq!(a, "imok", "{flavor}");
    }
}
