//! The `agentloop-mock` binary prints its address, serves the script, and stops on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentloop_testkit::WireFormat;
use common::{assemble, first_request, post};

#[tokio::test]
async fn prints_its_address_and_serves_until_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns": [{"text": "hello from the binary", "chunk_size": 3}]}"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentloop-mock"))
        .arg("--script")
        .arg(&script)
        .args(["--port", "0", "--host", "127.0.0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let base = line
        .trim_end()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    for format in common::FORMATS {
        let reply = post(&base, common::path(format), &first_request(format, "hi")).await;
        assert_eq!(reply.status, 200);
        let a = assemble(format, &reply.body);
        assert_eq!(a.text, "hello from the binary");
        assert!(a.terminal);
    }
    // A second chat turn does not exist: 500.
    let f = WireFormat::OpenAiChat;
    let mut req = first_request(f, "hi");
    req["messages"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"role": "assistant", "content": "x"}));
    assert_eq!(post(&base, common::path(f), &req).await.status, 500);

    #[cfg(unix)]
    {
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        // A hang guard: the server exits at once on SIGTERM.
        let deadline = Instant::now() + Duration::from_secs(60);
        let exit = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "no exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(exit.success(), "{exit:?}");
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(err.contains("stopped after 4 requests"), "{err}");
    }
    #[cfg(not(unix))]
    {
        child.kill().unwrap();
        let _ = child.wait();
    }
}

#[test]
fn an_invalid_script_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.json");
    std::fs::write(&script, r#"{"turns": [{"txet": "typo"}]}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentloop-mock"))
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("txet"), "{err}");
    assert!(out.stdout.is_empty());
}
