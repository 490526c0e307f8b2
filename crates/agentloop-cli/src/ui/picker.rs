//! Resuming a session the way other agent CLIs do: `agentloop resume` with no id,
//! `agentloop --resume` and `chat --resume` list this workspace's sessions on the terminal
//! (most recent first: title or first prompt, age, model replies; a sub-agent's child session
//! never appears) and continue the chosen one in chat. `agentloop resume ID` keeps its older
//! meaning for a session with a run parked for approval (see `approvals::resume`) and continues
//! any other session in chat.
//!
//! The list is a plain numbered one read through the approval prompt's terminal helpers: the
//! answer is a line, pending input is discarded before the question, so keys typed earlier
//! never pick a session.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;

use agentloop::session::{SessionFilter, SessionInfo, SessionStore};
use agentloop::transcript::Role;

use crate::cli::{ApproveArg, Command, ResumeArgs, RunArgs};
use crate::commands::sessions::{open_store, resolve_id, workspace_key};
use crate::error::Failure;
use crate::ui::prompt::tty::{Channel, Term};
use crate::ui::render::{Style, one_line};
use crate::ui::safe_text::visible_line;

/// How many sessions the list shows.
const SHOWN: usize = 20;

/// The question under the list.
const QUESTION: &str = "pick a number (Enter = 1, q = quit): ";

/// Whether stdin and stdout are both a terminal (a person can answer the list).
fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// How long ago `then_ms` was, as a person says it: "just now", "5m ago", "3h ago", "2d ago".
pub fn age(now_ms: u64, then_ms: u64) -> String {
    let secs = now_ms.saturating_sub(then_ms) / 1000;
    match secs {
        0..60 => "just now".to_owned(),
        60..3_600 => format!("{}m ago", secs / 60),
        3_600..86_400 => format!("{}h ago", secs / 3_600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What names a session in the list: its title, else its first prompt.
fn label(store: &dyn SessionStore, info: &SessionInfo) -> String {
    if let Some(title) = info.title.as_deref().filter(|t| !t.trim().is_empty()) {
        return title.to_owned();
    }
    store
        .load_raw(&info.id)
        .ok()
        .and_then(|messages| {
            messages
                .into_iter()
                .find(|m| m.role == Role::User && !m.text().trim().is_empty())
        })
        .map_or_else(|| "(no prompt yet)".to_owned(), |m| m.text())
}

/// One row of the list: `  N. label   3h ago · 4 turns · id`.
fn row(n: usize, label: &str, info: &SessionInfo, now: u64, style: Style) -> String {
    let turns = info.stats.turns;
    let label = one_line(label, 56);
    let pad = 56usize.saturating_sub(label.chars().count());
    let short: String = info.id.chars().take(8).collect();
    format!(
        "{n:>3}. {label}{}  {}",
        " ".repeat(pad),
        style.dim(&format!(
            "{} · {turns} turn{} · {}",
            age(now, info.updated_ms),
            if turns == 1 { "" } else { "s" },
            visible_line(&short)
        ))
    )
}

/// The choice typed at the question: `Ok(Some(i))` a row (0-based), `Ok(None)` quit, `Err` a
/// line saying what is accepted.
fn choice(answer: &str, rows: usize) -> Result<Option<usize>, String> {
    let answer = answer.trim();
    if answer.is_empty() {
        return Ok(Some(0));
    }
    if answer.eq_ignore_ascii_case("q") || answer.eq_ignore_ascii_case("quit") {
        return Ok(None);
    }
    match answer.parse::<usize>() {
        Ok(n) if (1..=rows).contains(&n) => Ok(Some(n - 1)),
        _ => Err(format!(
            "{} is not in the list: type a number from 1 to {rows}, Enter for 1, q to quit",
            visible_line(answer)
        )),
    }
}

/// Lists the top-level sessions recorded in `workspace` and reads the person's choice;
/// `None` when they quit. No session there is an error.
pub fn pick(store: &dyn SessionStore, workspace: &Path) -> Result<Option<SessionInfo>, Failure> {
    let key = workspace_key(workspace)?;
    let filter = SessionFilter::new()
        .workspace(key.clone())
        .top_level(true)
        .limit(SHOWN);
    let sessions = store.list_where(&filter)?;
    if sessions.is_empty() {
        return Err(Failure::new(format!(
            "no session recorded in {} yet (`agentloop chat` starts one)",
            visible_line(&key)
        )));
    }
    let style = Style::new(crate::ui::render::stdout_color());
    let now = now_ms();
    let mut list = format!("sessions in {}:\n", visible_line(&key));
    for (i, info) in sessions.iter().enumerate() {
        list.push_str(&row(i + 1, &label(store, info), info, now, style));
        list.push('\n');
    }
    let term = Term::open(Channel::Stdio)
        .map_err(|e| Failure::new(format!("cannot use the terminal: {e}")))?;
    let read_error = |e: std::io::Error| Failure::new(format!("cannot read the terminal: {e}"));
    term.write(&list).map_err(read_error)?;
    loop {
        let Some(answer) = term.ask_line(QUESTION).map_err(read_error)? else {
            return Ok(None); // end of input: nothing chosen
        };
        match choice(&answer, sessions.len()) {
            Ok(Some(i)) => return Ok(sessions.into_iter().nth(i)),
            Ok(None) => return Ok(None),
            Err(line) => term
                .write(&format!("{}\n", style.red(&line)))
                .map_err(read_error)?,
        }
    }
}

/// `--resume [ID]` of `chat`: with an id it is `--session ID`; alone, the list decides.
/// Returns `false` when the person quit the list (nothing to open).
pub fn chat_resume_flag(db: Option<&str>, args: &mut RunArgs) -> Result<bool, Failure> {
    match args.resume.take() {
        None => Ok(true),
        Some(Some(id)) => {
            args.session = Some(id);
            Ok(true)
        }
        Some(None) => {
            let store = open_store(db)?;
            let workspace = args.target.root()?;
            match pick(&*store, &workspace)? {
                Some(info) => {
                    args.session = Some(info.id);
                    Ok(true)
                }
                None => Ok(false),
            }
        }
    }
}

/// `--resume [ID]` of `run` (no terminal to pick on): with an id it is `--session ID`.
pub fn run_resume_flag(mut args: RunArgs) -> Result<RunArgs, Failure> {
    match args.resume.take() {
        None => Ok(args),
        Some(Some(id)) => {
            args.session = Some(id);
            Ok(args)
        }
        Some(None) => Err(Failure::usage(
            "--resume without an id lists sessions on a terminal; here give one: \
             `--resume ID` or `--session ID` (`agentloop sessions list` shows them)",
        )),
    }
}

/// `agentloop resume [ID]` (see the module docs).
pub async fn command(db: Option<&str>, args: ResumeArgs) -> Result<(), Failure> {
    let Some(given) = args.session.clone() else {
        if !on_terminal() {
            return Err(Failure::usage(
                "agentloop resume needs a session id without a terminal: `agentloop resume ID` \
                 (or `agentloop run --session ID PROMPT`; `agentloop sessions list` shows them)",
            ));
        }
        return chat(db, &args, None).await;
    };
    let store = open_store(db)?;
    let id = resolve_id(&*store, &given)?;
    if store.parked(&id)?.is_some() || !on_terminal() {
        // A parked run goes on; without a terminal, `approvals::resume` says what else to do.
        return crate::commands::approvals::resume(db, args).await;
    }
    drop(store);
    chat(db, &args, Some(&id)).await
}

/// Opens the chat on session `id` (`None`: the list picks it), with the flags `resume` was
/// given, through the same parsing (config files, trust) as `agentloop chat`.
async fn chat(db: Option<&str>, args: &ResumeArgs, id: Option<&str>) -> Result<(), Failure> {
    let mut argv: Vec<OsString> = vec!["agentloop".into(), "chat".into()];
    match id {
        Some(id) => argv.extend(["--session".into(), id.into()]),
        None => argv.push("--resume".into()),
    }
    if let Some(dir) = &args.target.workspace {
        argv.extend(["--workspace".into(), dir.clone().into_os_string()]);
    }
    if args.explicit.model {
        argv.extend(["--model".into(), args.target.model.clone().into()]);
    }
    if let Some(url) = &args.base_url {
        argv.extend(["--base-url".into(), url.into()]);
    }
    if let Some(turns) = args.max_turns {
        argv.extend(["--max-turns".into(), turns.to_string().into()]);
    }
    if args.approve != ApproveArg::Defer {
        let name = clap::ValueEnum::to_possible_value(&args.approve)
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default();
        argv.extend(["--approve".into(), name.into()]);
    }
    match crate::config::layers::parse(argv)?.command {
        Some(Command::Chat(chat)) => crate::commands::chat::run(db, chat).await,
        _ => Err(Failure::new("cannot open the chat")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ages_read_like_a_person_says_them() {
        let now = 10 * 86_400_000;
        assert_eq!(age(now, now - 5_000), "just now");
        assert_eq!(age(now, now - 5 * 60_000), "5m ago");
        assert_eq!(age(now, now - 3 * 3_600_000), "3h ago");
        assert_eq!(age(now, now - 2 * 86_400_000), "2d ago");
        assert_eq!(age(now, now + 1_000), "just now", "a clock that went back");
    }

    #[test]
    fn the_resume_flag_alone_opens_a_chat_on_a_terminal() {
        use crate::invocation::{Terminal, rewritten as words};
        assert_eq!(
            words(&["--resume"], Terminal::Interactive),
            ["chat", "--resume"]
        );
        assert_eq!(
            words(&["--resume", "abc"], Terminal::Interactive),
            ["chat", "--resume", "abc"]
        );
        assert_eq!(words(&["--resume"], Terminal::Script), ["run", "--resume"]);
    }

    #[test]
    fn choices_are_a_row_enter_or_quit() {
        assert_eq!(choice("", 3), Ok(Some(0)));
        assert_eq!(choice(" 2 \n", 3), Ok(Some(1)));
        assert_eq!(choice("q", 3), Ok(None));
        assert!(choice("4", 3).unwrap_err().contains("1 to 3"));
        assert!(choice("0", 3).is_err());
        assert!(choice("x", 3).is_err());
    }
}
