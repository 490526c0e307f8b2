//! Typing while the agent works: what a person types during a turn is read here, key by key,
//! and a line ended with Enter is queued as a steering message (delivered after the current
//! tool batch). The terminal's own echo is off for the turn: the typed text is drawn by the
//! spinner on a line of its own under the spinner's line (`render::set_typed`), so the spinner's
//! redraws never erase it and the keys never land on — or push down — the spinner's line, which
//! would leave stale spinner lines above the tool calls. Backspace, Ctrl-U (the whole line) and
//! Ctrl-W (the last word) edit it; Ctrl-C still raises SIGINT, which cancels the turn; a line
//! left unfinished when the turn ends comes back as the start of the next prompt.
//!
//! While an approval question waits for its answer (`prompt::ASKING`), the terminal's input is
//! the question's: nothing is read here meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentloop::agent::MessageQueue;
use agentloop::transcript::Message;

use crate::ui::render::{Style, print_above_spinner, set_typed};
use crate::ui::safe_text::visible_line;

/// Reads what is typed while a turn runs (see the module docs).
pub struct SteeringReader {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<String>>,
    /// The terminal mode to restore when the turn ends.
    #[cfg(unix)]
    saved: Option<rustix::termios::Termios>,
}

/// Puts the terminal in the turn's mode — the line editor may have left it raw: keys arrive one
/// by one and are not echoed (they are drawn under the spinner), Ctrl-C raises SIGINT, output
/// newlines are the terminal's usual ones. Returns the mode to restore.
#[cfg(unix)]
fn turn_mode() -> Option<rustix::termios::Termios> {
    use rustix::termios::{
        InputModes, LocalModes, OptionalActions, OutputModes, SpecialCodeIndex, tcgetattr,
        tcsetattr,
    };
    let stdin = std::io::stdin();
    let saved = tcgetattr(&stdin).ok()?;
    let mut mode = saved.clone();
    mode.local_modes |= LocalModes::ISIG;
    mode.local_modes
        .remove(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ECHONL);
    mode.input_modes |= InputModes::ICRNL;
    mode.output_modes |= OutputModes::OPOST | OutputModes::ONLCR;
    mode.special_codes[SpecialCodeIndex::VMIN] = 1;
    mode.special_codes[SpecialCodeIndex::VTIME] = 0;
    tcsetattr(&stdin, OptionalActions::Now, &mode).ok()?;
    Some(saved)
}

impl SteeringReader {
    /// Starts reading; lines ended with Enter go to `queue`.
    #[cfg(unix)]
    pub fn start(queue: MessageQueue, style: Style) -> SteeringReader {
        let saved = turn_mode();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = stop.clone();
            move || read_steering(&stop, &queue, style)
        });
        SteeringReader {
            stop,
            thread: Some(thread),
            saved,
        }
    }

    /// Starts reading (elsewhere than Unix: nothing is read during a turn).
    #[cfg(not(unix))]
    pub fn start(_queue: MessageQueue, _style: Style) -> SteeringReader {
        SteeringReader {
            stop: Arc::new(AtomicBool::new(true)),
            thread: None,
        }
    }

    /// Stops reading and restores the terminal; returns the line typed and not yet sent.
    pub fn stop(mut self) -> String {
        self.stop.store(true, Ordering::SeqCst);
        let unfinished = self
            .thread
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or_default();
        #[cfg(unix)]
        if let Some(saved) = self.saved.take() {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                &saved,
            );
        }
        set_typed("");
        unfinished
    }
}

/// The line being typed, edited key by key.
#[derive(Default)]
struct Typing {
    line: String,
    /// The first bytes of a character not complete yet.
    partial: Vec<u8>,
    /// Inside an escape sequence (an arrow key …): its bytes are dropped.
    escape: Escape,
}

#[derive(Default, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    /// ESC seen.
    Start,
    /// ESC `[` (or `O`) seen: parameters until a final byte.
    Sequence,
}

impl Typing {
    /// Takes one byte; returns a finished line when it was Enter.
    fn key(&mut self, byte: u8) -> Option<String> {
        match (&self.escape, byte) {
            (Escape::Start, b'[' | b'O') => {
                self.escape = Escape::Sequence;
                return None;
            }
            (Escape::Start, _) => {
                self.escape = Escape::None;
                return None;
            }
            (Escape::Sequence, 0x40..=0x7e) => {
                self.escape = Escape::None;
                return None;
            }
            (Escape::Sequence, _) => return None,
            (Escape::None, _) => {}
        }
        match byte {
            b'\r' | b'\n' => return Some(std::mem::take(&mut self.line)),
            0x7f | 0x08 => {
                self.line.pop();
            }
            0x15 => self.line.clear(),
            0x17 => {
                let kept = self.line.trim_end().rfind(char::is_whitespace);
                self.line.truncate(kept.map_or(0, |i| i + 1));
            }
            0x1b => self.escape = Escape::Start,
            b if b < 0x20 => {}
            b => {
                self.partial.push(b);
                match std::str::from_utf8(&self.partial) {
                    Ok(text) => {
                        self.line.push_str(text);
                        self.partial.clear();
                    }
                    Err(e) if e.error_len().is_some() || self.partial.len() >= 4 => {
                        self.partial.clear();
                    }
                    Err(_) => {}
                }
            }
        }
        None
    }
}

/// Reads keys until `stop`; returns the unfinished line.
#[cfg(unix)]
fn read_steering(stop: &AtomicBool, queue: &MessageQueue, style: Style) -> String {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdin = std::io::stdin();
    let mut typing = Typing::default();
    let mut buf = [0u8; 256];
    while !stop.load(Ordering::SeqCst) {
        if crate::ui::prompt::ASKING.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        }
        let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
        let timeout = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(_) => break,
        }
        if stop.load(Ordering::SeqCst) || crate::ui::prompt::ASKING.load(Ordering::SeqCst) {
            continue;
        }
        let read = match rustix::io::read(&stdin, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &buf[..read] {
            if let Some(line) = typing.key(byte) {
                set_typed("");
                send(queue, line.trim(), style);
            }
        }
        set_typed(&typing.line);
    }
    typing.line
}

/// Queues a finished line (an empty one is dropped) and says so above the spinner.
fn send(queue: &MessageQueue, text: &str, style: Style) {
    if text.is_empty() {
        return;
    }
    queue.push(Message::user(text));
    let line = format!("↳ queued for the agent: {}", visible_line(text));
    print_above_spinner(&style.dim(&line));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(keys: &[u8]) -> (Vec<String>, String) {
        let mut typing = Typing::default();
        let sent = keys.iter().filter_map(|&b| typing.key(b)).collect();
        (sent, typing.line)
    }

    #[test]
    fn keys_edit_the_line_and_enter_sends_it() {
        assert_eq!(
            typed(b"stop\x7f\x7fay\rnext"),
            (vec!["stay".to_owned()], "next".to_owned())
        );
        assert_eq!(typed(b"one two\x17"), (vec![], "one ".to_owned()));
        assert_eq!(typed(b"gone\x15kept"), (vec![], "kept".to_owned()));
        // An arrow key is dropped whole; a character split over reads is kept whole.
        assert_eq!(typed(b"a\x1b[Db"), (vec![], "ab".to_owned()));
        assert_eq!(typed("héllo".as_bytes()), (vec![], "héllo".to_owned()));
        assert_eq!(typed(b"x\x03\x01y"), (vec![], "xy".to_owned()));
    }
}
