//! The terminal an approval question is asked on: one key read in raw mode (restored on every
//! path, Ctrl-C included), a line read in the terminal's normal mode, pending input flushed
//! before every read (so keys typed earlier, or bytes a command made the terminal send, never
//! answer a question), the terminal's height, and the pager that shows a whole payload.

use std::io::{BufRead, BufReader, Read, Write};
#[cfg(unix)]
use std::os::fd::{AsFd, BorrowedFd};

/// Where the question is asked.
#[derive(Clone, Copy, Debug)]
pub enum Channel {
    /// Read and write `/dev/tty`.
    #[cfg(unix)]
    DevTty,
    /// Write stderr, read stdin.
    Stdio,
}

/// What one key press means to the prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// A printable key, lowercased.
    Char(char),
    /// Enter alone.
    Enter,
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D, or the end of input.
    End,
    /// Anything else (an arrow, a function key, a control character).
    Other,
}

#[cfg(unix)]
pub fn open_tty() -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
}

/// One open terminal for the duration of one question.
pub struct Term {
    channel: Channel,
    #[cfg(unix)]
    tty: Option<std::fs::File>,
    /// Held so that its descriptor can be borrowed for as long as the question lasts.
    #[cfg(unix)]
    stdin: std::io::Stdin,
}

impl Term {
    /// Opens the channel (`/dev/tty` once per question).
    pub fn open(channel: Channel) -> std::io::Result<Term> {
        Ok(Term {
            channel,
            #[cfg(unix)]
            tty: match channel {
                Channel::DevTty => Some(open_tty()?),
                Channel::Stdio => None,
            },
            #[cfg(unix)]
            stdin: std::io::stdin(),
        })
    }

    /// The descriptor whose terminal settings and input queue are the question's.
    #[cfg(unix)]
    fn input_fd(&self) -> BorrowedFd<'_> {
        match &self.tty {
            Some(tty) => tty.as_fd(),
            None => self.stdin.as_fd(),
        }
    }

    /// Writes `text` and flushes.
    pub fn write(&self, text: &str) -> std::io::Result<()> {
        match self.channel {
            #[cfg(unix)]
            Channel::DevTty => {
                let mut tty = self.tty.as_ref().ok_or(std::io::ErrorKind::NotFound)?;
                tty.write_all(text.as_bytes())?;
                tty.flush()
            }
            Channel::Stdio => {
                let mut err = std::io::stderr().lock();
                err.write_all(text.as_bytes())?;
                err.flush()
            }
        }
    }

    /// The terminal's height in rows: its window size, else `$LINES`, else
    /// [`DEFAULT_ROWS`](super::screen::DEFAULT_ROWS).
    pub fn rows(&self) -> usize {
        #[cfg(unix)]
        if let Ok(size) = rustix::termios::tcgetwinsize(self.input_fd()) {
            if size.ws_row > 0 {
                return usize::from(size.ws_row);
            }
        }
        std::env::var("LINES")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|rows| *rows > 0)
            .unwrap_or(super::screen::DEFAULT_ROWS)
    }

    /// Discards whatever was typed (or sent to the terminal) and not read yet: only keys
    /// pressed after the question is on the screen answer it.
    fn flush_input(&self) {
        #[cfg(unix)]
        let _ = rustix::termios::tcflush(self.input_fd(), rustix::termios::QueueSelector::IFlush);
    }

    fn read_bytes(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &self.channel {
            #[cfg(unix)]
            Channel::DevTty => {
                let mut tty = self.tty.as_ref().ok_or(std::io::ErrorKind::NotFound)?;
                tty.read(buf)
            }
            Channel::Stdio => std::io::stdin().lock().read(buf),
        }
    }

    /// Asks `question` and reads one key press, without waiting for Enter. Pending input is
    /// flushed before the question is written (a key pressed once it is on the screen is
    /// kept, anything earlier is not), and the terminal is in raw mode from then until the key
    /// arrives; its settings come back before this returns, whatever happens (Ctrl-C arrives
    /// here as a key, not as a signal). Where the terminal cannot be put in raw mode, a line is
    /// read and its first character is the key.
    pub fn ask_key(&self, question: &str) -> std::io::Result<Key> {
        self.flush_input();
        #[cfg(unix)]
        if let Some(_raw) = RawMode::enter(self.input_fd()) {
            self.write(question)?;
            let mut byte = [0u8; 1];
            if self.read_bytes(&mut byte)? == 0 {
                return Ok(Key::End);
            }
            let key = key_of(byte[0]);
            if matches!(key, Key::Other) || byte[0] >= 0x80 {
                // The rest of an escape sequence or of a multi-byte character: one key.
                self.flush_input();
                return Ok(Key::Other);
            }
            return Ok(key);
        }
        self.write(question)?;
        let line = self.read_line_raw()?;
        Ok(match line {
            None => Key::End,
            Some(line) => match line.trim().chars().next() {
                None => Key::Enter,
                Some(c) => key_of_char(c),
            },
        })
    }

    /// Asks `question` and reads one line in the terminal's normal mode (echoed, editable),
    /// pending input flushed before the question is written; `None` at the end of input.
    pub fn ask_line(&self, question: &str) -> std::io::Result<Option<String>> {
        self.flush_input();
        // The chat's turn reads keys unechoed (see `chat::steering`): the line mode comes
        // back for this answer.
        #[cfg(unix)]
        let _line = RawMode::line(self.input_fd());
        self.write(question)?;
        self.read_line_raw()
    }

    fn read_line_raw(&self) -> std::io::Result<Option<String>> {
        let mut line = String::new();
        let read = match &self.channel {
            #[cfg(unix)]
            Channel::DevTty => {
                let tty = self.tty.as_ref().ok_or(std::io::ErrorKind::NotFound)?;
                BufReader::new(tty).read_line(&mut line)?
            }
            Channel::Stdio => std::io::stdin().lock().read_line(&mut line)?,
        };
        Ok((read > 0).then_some(line))
    }

    /// Shows `text` in `$PAGER` (default `less -R`) on this terminal; prints it whole here when
    /// no pager can run.
    pub fn page(&self, text: &str) -> std::io::Result<()> {
        if self.run_pager(text).unwrap_or(false) {
            return Ok(());
        }
        self.write(text)
    }

    /// Whether the pager ran and ended well.
    fn run_pager(&self, text: &str) -> std::io::Result<bool> {
        use std::process::{Command, Stdio};
        let pager = std::env::var("PAGER")
            .ok()
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| "less -R".to_owned());
        let output: Stdio = match &self.channel {
            #[cfg(unix)]
            Channel::DevTty => match &self.tty {
                Some(tty) => tty.try_clone()?.into(),
                None => return Ok(false),
            },
            #[cfg(unix)]
            Channel::Stdio => std::io::stderr().as_fd().try_clone_to_owned()?.into(),
            #[cfg(not(unix))]
            Channel::Stdio => return Ok(false),
        };
        // `$PAGER` may carry arguments (`less -R`), as other tools read it: run by the shell.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&pager)
            .stdin(Stdio::piped())
            .stdout(output)
            .spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            // A pager quit before reading everything closes the pipe: not an error.
            let _ = stdin.write_all(text.as_bytes());
        }
        Ok(child.wait()?.success())
    }
}

fn key_of(byte: u8) -> Key {
    match byte {
        b'\r' | b'\n' => Key::Enter,
        0x03 => Key::Interrupt,
        0x04 => Key::End,
        b if b.is_ascii_graphic() => key_of_char(char::from(b)),
        _ => Key::Other,
    }
}

fn key_of_char(c: char) -> Key {
    Key::Char(c.to_ascii_lowercase())
}

/// The terminal in raw mode (no line editing, no echo, Ctrl-C as a byte) — or in line mode —
/// until dropped, which restores the settings it found: on every return, on an error and on a
/// panic.
#[cfg(unix)]
struct RawMode<'a> {
    fd: BorrowedFd<'a>,
    saved: rustix::termios::Termios,
}

#[cfg(unix)]
impl<'a> RawMode<'a> {
    /// `None` when `fd` is not a terminal or its settings cannot be changed.
    fn enter(fd: BorrowedFd<'a>) -> Option<RawMode<'a>> {
        use rustix::termios::{
            LocalModes, OptionalActions, SpecialCodeIndex, tcgetattr, tcsetattr,
        };
        let saved = tcgetattr(fd).ok()?;
        let mut raw = saved.clone();
        raw.local_modes
            .remove(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG);
        raw.special_codes[SpecialCodeIndex::VMIN] = 1;
        raw.special_codes[SpecialCodeIndex::VTIME] = 0;
        tcsetattr(fd, OptionalActions::Now, &raw).ok()?;
        Some(RawMode { fd, saved })
    }
}

#[cfg(unix)]
impl<'a> RawMode<'a> {
    /// The terminal's normal line mode (echo, line editing, Ctrl-C as a signal) until dropped;
    /// `None` when `fd` is not a terminal or its settings cannot be changed.
    fn line(fd: BorrowedFd<'a>) -> Option<RawMode<'a>> {
        use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
        let saved = tcgetattr(fd).ok()?;
        let mut line = saved.clone();
        line.local_modes |= LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG;
        tcsetattr(fd, OptionalActions::Now, &line).ok()?;
        Some(RawMode { fd, saved })
    }
}

#[cfg(unix)]
impl Drop for RawMode<'_> {
    fn drop(&mut self) {
        let _ =
            rustix::termios::tcsetattr(self.fd, rustix::termios::OptionalActions::Now, &self.saved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_become_keys() {
        assert_eq!(key_of(b'Y'), Key::Char('y'));
        assert_eq!(key_of(b'\r'), Key::Enter);
        assert_eq!(key_of(b'\n'), Key::Enter);
        assert_eq!(key_of(0x03), Key::Interrupt);
        assert_eq!(key_of(0x04), Key::End);
        assert_eq!(key_of(0x1b), Key::Other);
        assert_eq!(key_of(b'?'), Key::Char('?'));
    }
}
