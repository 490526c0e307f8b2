//! The conversation of a form or a URL request on the controlling terminal: keys and lines
//! read in raw mode (so Ctrl-C and Ctrl-D cancel the form, not the run), one request at a
//! time, the spinner held off the screen and the chat's type-ahead reader paused meanwhile.

use std::io::{IsTerminal, Read, Write};

use super::{ElicitationAnswer, ElicitationRequest, Elicitor, Map, Style, Value};
use super::{Field, hint, parse, shown_default, url_domain};
use super::{visible, visible_line};
use crate::ui::prompt::one_question;

/// What one key or line read ended with.
enum Read1 {
    Text(String),
    /// Ctrl-C, Ctrl-D or the end of input.
    Cancel,
}

/// The elicitor asking on the controlling terminal; `None` without one (stdin and stderr
/// both redirected, or no `/dev/tty`).
pub(super) fn elicitor() -> Option<Elicitor> {
    if !std::io::stdin().is_terminal() && !std::io::stderr().is_terminal() {
        return None;
    }
    #[cfg(unix)]
    {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        let style =
            Style::new(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none());
        Some(Elicitor::new(move |request| {
            Box::pin(async move {
                tokio::task::spawn_blocking(move || converse(&request, style))
                    .await
                    .unwrap_or(ElicitationAnswer::Cancel)
            })
        }))
    }
    #[cfg(not(unix))]
    None
}

/// Asks `request` on the terminal; a terminal that fails mid-way cancels.
fn converse(request: &ElicitationRequest, style: Style) -> ElicitationAnswer {
    let answer = one_question(|| {
        crate::ui::render::suspend_spinner(|| {
            let tty = Tty::open().ok()?;
            match request {
                ElicitationRequest::Form {
                    server,
                    message,
                    schema,
                    order,
                    ..
                } => form(&tty, server, message, (schema, order), style),
                ElicitationRequest::Url {
                    server,
                    message,
                    url,
                    ..
                } => url_consent(&tty, server, message, url, style),
                _ => Some(ElicitationAnswer::Decline),
            }
        })
    });
    answer.unwrap_or(ElicitationAnswer::Cancel)
}

/// The opening of a request: "MCP server `NAME` ASKS:" in bold, then the server's message,
/// indented. `None` when the terminal failed.
fn ask_head(tty: &Tty, server: &str, asks: &str, message: &str, style: Style) -> Option<()> {
    let name = style.bold(&format!("MCP server `{}`", visible_line(server)));
    tty.write(&format!("\n{name} {asks}:\n")).ok()?;
    tty.write(&indent(message)).ok()
}

/// The form: its fields shown, then fill in / decline / cancel, the answers, and accept /
/// edit / decline / cancel. `None` when the terminal failed.
fn form(
    tty: &Tty,
    server: &str,
    message: &str,
    (schema, order): (&Value, &[String]),
    style: Style,
) -> Option<ElicitationAnswer> {
    ask_head(tty, server, "asks for input", message, style)?;
    let fields = match super::fields(schema, order) {
        Ok(found) => found,
        Err(why) => {
            let line = format!("  this form cannot be shown here ({why}); declined\n");
            tty.write(&style.yellow(&line)).ok()?;
            return Some(ElicitationAnswer::Decline);
        }
    };
    for field in &fields {
        tty.write(&format!(
            "  • {} [{}]\n",
            visible_line(&field.label),
            hint(field)
        ))
        .ok()?;
    }
    let first = "[f]ill in / [d]ecline / [c]ancel: ";
    match choose(tty, first, &['f', 'd', 'c'])? {
        'd' => return Some(ElicitationAnswer::Decline),
        'c' => return Some(ElicitationAnswer::Cancel),
        _ => {}
    }
    loop {
        let Some(content) = fill_in(tty, &fields, style)? else {
            return Some(ElicitationAnswer::Cancel);
        };
        let summary: String = content
            .iter()
            .map(|(k, v)| format!("  {}: {}\n", visible_line(k), visible_line(&v.to_string())))
            .collect();
        tty.write(&summary).ok()?;
        let last = "send it? [a]ccept / [e]dit / [d]ecline / [c]ancel: ";
        match choose(tty, last, &['a', 'e', 'd', 'c'])? {
            'a' => return Some(ElicitationAnswer::Accept(content)),
            'd' => return Some(ElicitationAnswer::Decline),
            'c' => return Some(ElicitationAnswer::Cancel),
            _ => {}
        }
    }
}

/// Asks every field, each until its answer is acceptable; `Some(None)` when cancelled.
fn fill_in(tty: &Tty, fields: &[Field], style: Style) -> Option<Option<Map<String, Value>>> {
    let mut content = Map::new();
    for field in fields {
        if let Some(description) = &field.description {
            tty.write(&style.dim(&format!("  {}\n", visible_line(description))))
                .ok()?;
        }
        if let super::Kind::Choice(options) | super::Kind::Choices { options, .. } = &field.kind {
            for (i, option) in options.iter().enumerate() {
                tty.write(&format!("    {}. {}\n", i + 1, option.shown()))
                    .ok()?;
            }
        }
        let default = shown_default(field)
            .map(|d| format!(" [{}]", visible_line(&d)))
            .unwrap_or_default();
        let question = format!("  {}{default}: ", visible_line(&field.label));
        loop {
            let typed = match tty.read_line(&question).ok()? {
                Read1::Cancel => return Some(None),
                Read1::Text(typed) => typed,
            };
            match parse(field, &typed) {
                Ok(Some(value)) => {
                    content.insert(field.name.clone(), value);
                    break;
                }
                Ok(None) => break,
                Err(why) => {
                    tty.write(&style.red(&format!("    {why}\n"))).ok()?;
                }
            }
        }
    }
    Some(Some(content))
}

/// The URL, its domain on a line of its own, and consent to open it.
fn url_consent(
    tty: &Tty,
    server: &str,
    message: &str,
    url: &str,
    style: Style,
) -> Option<ElicitationAnswer> {
    ask_head(tty, server, "asks you to open a web page", message, style)?;
    tty.write(&format!("  URL:    {}\n", visible_line(url)))
        .ok()?;
    let Some(domain) = url_domain(url) else {
        let line = "  not a web address (http or https); declined\n";
        tty.write(&style.yellow(line)).ok()?;
        return Some(ElicitationAnswer::Decline);
    };
    tty.write(&format!(
        "  domain: {}\n",
        style.bold(&visible_line(&domain))
    ))
    .ok()?;
    match choose(
        tty,
        "open it? [o]pen / [d]ecline / [c]ancel: ",
        &['o', 'd', 'c'],
    )? {
        'o' => {
            crate::mcp_auth::open_in_browser(url);
            tty.write("  opened in the browser (if one started; else open it yourself)\n")
                .ok()?;
            Some(ElicitationAnswer::Accept(Map::new()))
        }
        'd' => Some(ElicitationAnswer::Decline),
        _ => Some(ElicitationAnswer::Cancel),
    }
}

/// Untrusted text, every line indented.
fn indent(text: &str) -> String {
    visible(text).lines().map(|l| format!("  {l}\n")).collect()
}

/// Asks `question` until one of `keys` is pressed; Ctrl-C / Ctrl-D mean `c` (cancel).
fn choose(tty: &Tty, question: &str, keys: &[char]) -> Option<char> {
    loop {
        let key = match tty.read_key(question).ok()? {
            Read1::Cancel => 'c',
            Read1::Text(key) => key.chars().next().unwrap_or(' ').to_ascii_lowercase(),
        };
        tty.write("\n").ok()?;
        if keys.contains(&key) {
            return Some(key);
        }
    }
}

/// The controlling terminal, for one request.
struct Tty {
    file: std::fs::File,
}

impl Tty {
    fn open() -> std::io::Result<Tty> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")?;
        Ok(Tty { file })
    }

    fn write(&self, text: &str) -> std::io::Result<()> {
        let mut file = &self.file;
        file.write_all(text.as_bytes())?;
        file.flush()
    }

    fn byte(&self) -> std::io::Result<Option<u8>> {
        let mut byte = [0u8; 1];
        let mut file = &self.file;
        Ok((file.read(&mut byte)? == 1).then_some(byte[0]))
    }

    /// One key press after `question` (earlier input discarded).
    fn read_key(&self, question: &str) -> std::io::Result<Read1> {
        let _raw = raw::Raw::enter(&self.file);
        self.write(question)?;
        Ok(match self.byte()? {
            None | Some(0x03 | 0x04) => Read1::Cancel,
            Some(b) if b.is_ascii_graphic() => Read1::Text(char::from(b).to_string()),
            Some(_) => Read1::Text(String::new()),
        })
    }

    /// One line after `question`, edited here (Backspace, Ctrl-U), echoed without control
    /// characters; escape sequences (arrows) are ignored.
    fn read_line(&self, question: &str) -> std::io::Result<Read1> {
        let _raw = raw::Raw::enter(&self.file);
        self.write(question)?;
        let mut line: Vec<u8> = Vec::new();
        loop {
            let Some(b) = self.byte()? else {
                return Ok(Read1::Cancel);
            };
            match b {
                0x03 | 0x04 => {
                    self.write("\n")?;
                    return Ok(Read1::Cancel);
                }
                b'\r' | b'\n' => {
                    self.write("\n")?;
                    return Ok(Read1::Text(String::from_utf8_lossy(&line).into_owned()));
                }
                0x7f | 0x08 => {
                    // One character back: its continuation bytes, then its first byte.
                    while line.last().is_some_and(|b| b & 0xc0 == 0x80) {
                        line.pop();
                    }
                    if line.pop().is_some() {
                        self.write("\u{8} \u{8}")?;
                    }
                }
                0x15 => {
                    let chars = String::from_utf8_lossy(&line).chars().count();
                    self.write(&"\u{8} \u{8}".repeat(chars))?;
                    line.clear();
                }
                0x1b => self.skip_escape()?,
                b if b < 0x20 => {}
                b => {
                    line.push(b);
                    // Echo a character once it is whole.
                    if std::str::from_utf8(&line).is_ok() {
                        let mut file = &self.file;
                        let start = line
                            .iter()
                            .rposition(|b| b & 0xc0 != 0x80)
                            .unwrap_or_default();
                        file.write_all(&line[start..])?;
                        file.flush()?;
                    }
                }
            }
        }
    }

    /// Drops the rest of an escape sequence (`ESC [ … letter`).
    fn skip_escape(&self) -> std::io::Result<()> {
        if !matches!(self.byte()?, Some(b'[' | b'O')) {
            return Ok(());
        }
        while let Some(b) = self.byte()? {
            if (0x40..=0x7e).contains(&b) {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(unix)]
mod raw {
    use std::os::fd::{AsFd, BorrowedFd};

    use rustix::termios::{
        LocalModes, OptionalActions, QueueSelector, SpecialCodeIndex, Termios, tcflush, tcgetattr,
        tcsetattr,
    };

    /// The terminal in raw mode (no echo, no line editing, Ctrl-C as a byte) with pending
    /// input discarded, until dropped, which restores its settings on every path.
    pub(super) struct Raw<'a> {
        fd: BorrowedFd<'a>,
        saved: Option<Termios>,
    }

    impl<'a> Raw<'a> {
        pub(super) fn enter(file: &'a std::fs::File) -> Raw<'a> {
            let fd = file.as_fd();
            let _ = tcflush(fd, QueueSelector::IFlush);
            let saved = tcgetattr(fd).ok();
            if let Some(saved) = &saved {
                let mut raw = saved.clone();
                raw.local_modes
                    .remove(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG);
                raw.special_codes[SpecialCodeIndex::VMIN] = 1;
                raw.special_codes[SpecialCodeIndex::VTIME] = 0;
                let _ = tcsetattr(fd, OptionalActions::Now, &raw);
            }
            Raw { fd, saved }
        }
    }

    impl Drop for Raw<'_> {
        fn drop(&mut self) {
            if let Some(saved) = &self.saved {
                let _ = tcsetattr(self.fd, OptionalActions::Now, saved);
            }
        }
    }
}

#[cfg(not(unix))]
mod raw {
    /// No terminal modes to change here.
    pub(super) struct Raw;

    impl Raw {
        pub(super) fn enter(_file: &std::fs::File) -> Raw {
            Raw
        }
    }
}
