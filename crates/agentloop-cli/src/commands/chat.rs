//! `agentloop chat` (and bare `agentloop` on a terminal): a conversation kept open all day.
//!
//! Each prompt is one run of the loop on the session so far ([`execute`], the same pipeline as
//! `agentloop run`), rendered for a person: Markdown a line at a time, thinking collapsed to a
//! line, edits as diffs. Input is read with `rustyline` (line editing, history in the data
//! directory, a line ending in `\` continues on the next, Tab completes commands and `@path`s:
//! [`complete`]); a prompt's `@path` mentions attach those files ([`crate::ui::mentions`]),
//! `!command` runs a shell command for the person ([`bang`]), `/image` attaches an image to the
//! next prompt, and a resumed session shows its last exchanges first ([`earlier`]). Ctrl-C
//! during a turn cancels that turn (the loop records an "aborted" result for every unfinished
//! call, so the session stays valid) and returns to the prompt; at the prompt it clears the
//! line; Ctrl-D exits.
//!
//! While the agent works, a line typed and ended with Enter is queued as a steering message,
//! delivered after the current tool batch; what is typed shows on a line of its own under the
//! spinner ([`steering`]).

mod bang;
mod complete;
mod earlier;
mod steering;
mod store_slot;

use std::path::PathBuf;
use std::sync::Arc;

use agentloop::agent::compaction::effective_context;
use agentloop::agent::{MessageQueue, QueueMode};
use agentloop::builtin::{ApprovalPolicy, Workspace};
use agentloop::model::Model;
use agentloop::session::{
    NewSession, SessionFilter, SessionInfo, SessionLock, SessionSettings, SessionStore, StoreSpec,
    load_parked,
};
use agentloop::transcript::ImagePart;
use agentloop::transcript::Message;
use rustyline::error::ReadlineError;
use rustyline::{CompletionType, Config, Editor};

use crate::cli::{ApproveArg, RunArgs};
use crate::commands::run::{
    RunSetup, SessionTarget, discard_if_unanswered, execute, session_target, shell_options,
    system_prompt_for,
};
use crate::commands::sessions::{format_time, open_store};
use crate::config::session::{Choice, recorded, restore, store_if_changed};
use crate::error::Failure;
use crate::provider::{ModelSpec, build_model};
use crate::ui::render::{Style, summary_line, thousands};
use crate::ui::safe_text::visible_line;

/// How long to wait for another process to release a session.
const SESSION_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

const HELP: &str = "\
/model PROVIDER:NAME   switch the model for the next turns (no argument: show it)
/approve POLICY        ask | deny | allow — which mutating calls run (no argument: show it)
/thinking              show the last turn's thinking; `/thinking on|off` expands it always
/compact               summarise the older turns now (the full history stays stored)
/cost                  tokens and cost of this session
/clear                 start a new session
/sessions              this workspace's recent sessions (`/sessions all`: every workspace's)
/resume ID             continue another session with its model, provider, base URL and
                       reasoning (a unique id prefix is enough; flags given to agentloop win)
/mcp__SERVER__PROMPT   an MCP server's prompt as the next message (arguments by position
                       or NAME=VALUE; `agentloop mcp list` shows them)
/skills                the skills the agent can load
/plan                  plan mode: read-only tools, the model proposes a plan you accept
                       (`/plan off` leaves it)
/jobs                  background jobs: id, running or how it ended, command
/diff                  what this session changed in the workspace so far
/output [CALL_ID]      the full output of a tool call the model saw truncated (default:
                       the last one; `#N`: the output its note numbers N), in $PAGER
/rewind                pick a checkpoint: files back to before that tool call, and the
                       conversation continues from there (`/rewind ID` skips the picker)
/image PATH            attach an image (PNG, JPEG, GIF, WebP) to the next prompt
/help                  this list (custom commands follow it)
/exit                  leave (Ctrl-D works too)
@PATH                  in a prompt: attach that workspace file (Tab completes it)
!COMMAND               run a shell command yourself (sandboxed like the agent's); its
                       output is shown and goes to the model with your next prompt
A line ending in \\ continues on the next; Tab completes commands and @paths.
Ctrl-C cancels the running turn. While the agent works, type a line and press Enter to
steer it.";

use complete::Lines;
use steering::SteeringReader;
use store_slot::StoreSlot;

/// The text of a (possibly multi-line) input: continuation backslashes removed.
fn joined(input: &str) -> String {
    input
        .split('\n')
        .map(|line| line.strip_suffix('\\').unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where the prompt history is kept: next to the SQLite session database (with a PostgreSQL
/// store, next to the default database path).
fn history_path(db: Option<&str>) -> Option<PathBuf> {
    let db = match db.map(StoreSpec::parse) {
        Some(StoreSpec::Sqlite(path)) => path,
        _ => crate::commands::sessions::default_db_path().ok()?,
    };
    Some(db.with_file_name("chat_history.txt"))
}

/// The conversation's changing state.
struct Chat {
    args: RunArgs,
    /// Opened while the first prompt is drawn when nothing had to be read from it first.
    store: StoreSlot,
    workspace: Workspace,
    system_prompt: Option<String>,
    spec: ModelSpec,
    model: Arc<dyn Model>,
    /// `--model`, `--base-url` and `--reasoning` as the command line (and config) gave them;
    /// `/resume` applies the resumed session's stored settings over these.
    flags: Choice,
    approve: ApproveArg,
    /// The current session's id (chosen before its row exists, for a new conversation).
    id: String,
    /// The current session as stored; `None` while a new conversation has sent no prompt yet
    /// (its row is created with the first prompt: see [`Chat::recorded`]).
    session: Option<SessionInfo>,
    /// Held while the session is recorded: one writer per session.
    _lock: Option<SessionLock>,
    /// The session was created by this conversation (not resumed): it is deleted when left
    /// without a model reply.
    created: bool,
    expand_thinking: bool,
    last_thinking: String,
    style: Style,
    /// Background jobs of the whole conversation (`/jobs`).
    jobs: agentloop::builtin::Jobs,
    /// Images (`/image`) and `!command` outputs that go with the next prompt.
    pending_images: Vec<ImagePart>,
    pending_context: Vec<String>,
    /// A line typed during the last turn and not sent: the start of the next prompt.
    typed_ahead: String,
}

/// Runs `agentloop chat`.
pub async fn run(db: Option<&str>, mut args: RunArgs) -> Result<(), Failure> {
    check_chat_args(&args)?;
    if !crate::ui::picker::chat_resume_flag(db, &mut args)? {
        return Ok(()); // the person quit the list of sessions
    }
    let mut chat = Chat::open(db, args)?;
    let mut editor = line_editor(&chat)?;
    let history = history_path(db);
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    chat.banner();
    if chat.session.is_some() && !chat.created {
        chat.show_earlier();
    }
    if let Some(first) = chat.args.prompt.take() {
        chat.turn(first).await?;
    }
    loop {
        let prompt = chat.style.bold("› ");
        let typed = std::mem::take(&mut chat.typed_ahead);
        let (back, line) = tokio::task::spawn_blocking(move || {
            let line = editor.readline_with_initial(&prompt, (&typed, ""));
            (editor, line)
        })
        .await
        .map_err(|e| Failure::new(format!("the line editor stopped: {e}")))?;
        editor = back;
        match line {
            Ok(input) => {
                // The store opened while the prompt was drawn: a database that cannot be
                // opened ends the chat here, as it did at start, with the line kept in the
                // prompt history.
                if let Err(failure) = chat.store.get() {
                    if let Some(path) = &history {
                        let _ = editor.save_history(path);
                    }
                    return Err(failure);
                }
                if !chat.entered(&input).await? {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => {
                println!("{}", chat.style.dim("(Ctrl-D or /exit leaves)"));
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(Failure::new(format!("cannot read the terminal: {e}"))),
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    chat.farewell();
    Ok(())
}

/// Chat needs a terminal on both ends, and takes none of `run`'s output flags.
fn check_chat_args(args: &RunArgs) -> Result<(), Failure> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(Failure::usage(
            "agentloop chat needs a terminal; for scripts use `agentloop run \"PROMPT\"`",
        ));
    }
    if args.json.is_some() || args.output_schema.is_some() || args.quiet {
        return Err(Failure::usage(
            "--json, --quiet and --output-schema are for `agentloop run`, not chat",
        ));
    }
    Ok(())
}

/// Asks `question` on stdout and reads one line from the terminal (off the async runtime);
/// `None` when it cannot be read.
async fn ask_line(question: &str) -> Option<String> {
    print!("{question}");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await;
    answer.ok()?.ok()
}

/// The line editor of the chat: history, list completion of commands and workspace paths.
fn line_editor(chat: &Chat) -> Result<Editor<Lines, rustyline::history::DefaultHistory>, Failure> {
    let config = Config::builder()
        .auto_add_history(true)
        .completion_type(CompletionType::List)
        .build();
    let mut editor: Editor<Lines, rustyline::history::DefaultHistory> = Editor::with_config(config)
        .map_err(|e| Failure::new(format!("cannot open the line editor: {e}")))?;
    editor.set_helper(Some(Lines {
        root: chat.workspace.root().to_path_buf(),
        trusted: chat.args.trust.applies_to(chat.workspace.root()),
        builtin: complete::command_names(HELP),
    }));
    Ok(editor)
}

impl Chat {
    fn open(db: Option<&str>, mut args: RunArgs) -> Result<Chat, Failure> {
        let root = args.target.root()?;
        let workspace = Workspace::new(&root).map_err(|e| Failure::usage(e.to_string()))?;
        // An unusable config file is reported by the first turn, which reads it again.
        if let Ok(config) = crate::config::files::ConfigFile::load(workspace.root(), &args.trust) {
            crate::commands::worktrees::prune_expired(config.worktrees.prune_after);
        }
        // A new conversation reads nothing from the store before its first prompt.
        let (store, target) = if args.session.is_none() && !args.continue_last {
            (StoreSlot::opening(db), SessionTarget::New(None))
        } else {
            let store = open_store(db)?;
            let target = session_target(&*store, &args, workspace.root())?;
            (StoreSlot::ready(store), target)
        };
        let flags = Choice {
            model: args.target.model.clone(),
            base_url: args.base_url.clone(),
            reasoning: args.reasoning,
        };
        let mut choice = flags.clone();
        if let SessionTarget::Resume(info) = &target {
            if let Some(note) = restore(&info.settings, args.explicit, &mut choice) {
                eprintln!("agentloop: note: {note}");
            }
        }
        let (spec, model) = choice.build(&args)?;
        let settings = recorded(
            &spec,
            choice.base_url.as_deref(),
            choice.reasoning,
            workspace.root(),
        );
        (args.target.model, args.base_url, args.reasoning) =
            (choice.model, choice.base_url, choice.reasoning);
        let system_prompt = system_prompt_for(&args, &workspace);
        let created = matches!(target, SessionTarget::New(Some(_)));
        let (session, lock) = match target {
            SessionTarget::Resume(info) => {
                let store = store.get()?;
                let lock = store.lock_session(&info.id, SESSION_LOCK_WAIT)?;
                let mut info = store.info(&info.id)?;
                store_if_changed(&**store, &mut info, settings)?;
                (Some(info), Some(lock))
            }
            // A chosen id is taken at once (a second chat naming it fails now, not at its
            // first prompt).
            SessionTarget::New(Some(id)) => {
                let (info, lock) = new_session(&**store.get()?, settings, Some(id))?;
                (Some(info), Some(lock))
            }
            // Recorded with the first prompt: no write (and no sync of the database) before
            // the prompt is drawn, and nothing to discard when no prompt is sent.
            SessionTarget::New(None) => (None, None),
        };
        let id = session
            .as_ref()
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), |s| s.id.clone());
        if let Some(note) = args.approve.deprecation() {
            eprintln!("agentloop: note: {note}");
        }
        let color = crate::ui::render::stdout_color();
        let jobs = crate::jobs::table(args.keep_jobs);
        Ok(Chat {
            approve: args.approve,
            args,
            store,
            workspace,
            system_prompt,
            spec,
            model,
            flags,
            id,
            session,
            _lock: lock,
            created,
            expand_thinking: false,
            last_thinking: String::new(),
            style: Style::new(color),
            jobs,
            pending_images: Vec::new(),
            pending_context: Vec::new(),
            typed_ahead: String::new(),
        })
    }

    fn banner(&self) {
        println!(
            "{}",
            self.style.dim(&format!(
                "agentloop chat · {} · workspace {} · session {} · /help for commands",
                visible_line(&self.args.target.model),
                visible_line(&self.workspace.root().display().to_string()),
                visible_line(&self.id)
            ))
        );
    }

    /// The session as stored, created (and locked) now when this conversation has not
    /// recorded it yet: its first prompt is being sent.
    fn recorded(&mut self) -> Result<SessionInfo, Failure> {
        if let Some(info) = &self.session {
            return Ok(info.clone());
        }
        let new = NewSession::new()
            .id(self.id.clone())
            .settings(self.settings());
        let info = self.store.get()?.create(new)?;
        self.created = true;
        self._lock = Some(
            self.store
                .get()?
                .lock_session(&info.id, SESSION_LOCK_WAIT)?,
        );
        self.session = Some(info.clone());
        Ok(info)
    }

    /// `!command`: runs it with the agent's shell tool, shows the output and keeps it for the
    /// next prompt (see [`bang`]).
    async fn bang(&mut self, command: &str) {
        if command.is_empty() {
            println!("{}", self.style.red("!COMMAND runs a shell command"));
            return;
        }
        let options = shell_options(&self.args).jobs(self.jobs.clone());
        let ran = bang::run(&self.workspace, &options, command).await;
        crate::ui::render::out(&format!(
            "{}\n",
            crate::ui::safe_text::visible(ran.output.trim_end())
        ));
        println!(
            "{}",
            self.style
                .dim("(this output goes to the model with your next prompt)")
        );
        self.pending_context.push(ran.context());
    }

    /// `/image PATH`: the image goes with the next prompt.
    fn attach_image(&mut self, path: &str) {
        if path.is_empty() {
            println!("{}", self.style.red("/image PATH"));
            return;
        }
        match crate::commands::run::load_image(std::path::Path::new(path), "/image") {
            Ok(image) => {
                self.pending_images.push(image);
                println!(
                    "{}",
                    self.style.dim(&format!(
                        "image {} goes with your next prompt",
                        visible_line(path)
                    ))
                );
            }
            Err(e) => println!("{}", self.style.red(&e.to_string())),
        }
    }

    /// A typed prompt as the model gets it: the `!command` outputs kept for it first, then
    /// the prompt, then the `@path` files it mentions (see [`crate::ui::mentions`]). A slash
    /// command's prompt (an MCP prompt) is left alone.
    fn with_attachments(&mut self, prompt: String) -> String {
        if prompt.starts_with('/') {
            return prompt;
        }
        let (mut prompt, outcomes) = crate::ui::mentions::expand(&prompt, self.workspace.root());
        for outcome in outcomes {
            let line = visible_line(&outcome.line());
            if outcome.is_refusal() {
                println!("{}", self.style.red(&line));
            } else {
                println!("{}", self.style.dim(&line));
            }
        }
        if !self.pending_context.is_empty() {
            let mut context = std::mem::take(&mut self.pending_context).join("\n\n");
            context.push_str("\n\n");
            prompt.insert_str(0, &context);
        }
        prompt
    }

    /// A resumed session's last exchanges (see [`earlier`]).
    fn show_earlier(&self) {
        if let Some(messages) = self
            .store
            .get()
            .ok()
            .and_then(|s| s.load_raw(&self.id).ok())
        {
            print!(
                "{}",
                earlier::render(self.style, &messages, earlier::EXCHANGES)
            );
        }
    }

    /// Leaving the chat: the command that comes back to this conversation (none when it is
    /// discarded, the model never having answered in it).
    fn farewell(&mut self) {
        self.leave_session();
        if self.session.is_some() && self.store.get().is_ok_and(|s| s.info(&self.id).is_ok()) {
            let id = visible_line(&self.id);
            println!(
                "{}",
                self.style.dim(&format!(
                    "resume this conversation: agentloop chat --session {id} (or agentloop resume {id})"
                ))
            );
        }
    }

    /// One prompt: a run of the loop on the session so far. Lines typed too late to steer it
    /// (after its last model call) become the next prompt instead of being lost.
    async fn turn(&mut self, prompt: String) -> Result<(), Failure> {
        self.turn_as(prompt, None).await
    }

    /// [`turn`](Self::turn) for the prompt of a custom command, whose `model` and
    /// `allowed_tools` apply to that prompt only (not to what was typed while it ran).
    async fn turn_as(
        &mut self,
        prompt: String,
        command: Option<&crate::config::custom_commands::Expanded>,
    ) -> Result<(), Failure> {
        let mut next = Some(self.with_attachments(prompt));
        let mut command = command;
        while let Some(prompt) = next.take() {
            let leftover = self.one_turn(prompt, command.take()).await?;
            let texts: Vec<String> = leftover.iter().map(Message::text).collect();
            if !texts.is_empty() {
                let joined = texts.join("\n");
                println!(
                    "{}",
                    self.style.dim(&format!(
                        "↳ sending what you typed: {}",
                        visible_line(&joined)
                    ))
                );
                next = Some(joined);
            }
        }
        Ok(())
    }

    /// Acts on one entered line: a `/command`, a `!shell command` or a prompt; `false` when
    /// the chat ends.
    async fn entered(&mut self, input: &str) -> Result<bool, Failure> {
        let text = joined(input);
        let text = text.trim();
        if text.is_empty() {
            return Ok(true);
        }
        if let Some(command) = text.strip_prefix('/') {
            return self.command(command).await;
        }
        if let Some(command) = text.strip_prefix('!') {
            self.bang(command.trim()).await;
        } else {
            self.turn(text.to_owned()).await?;
        }
        Ok(true)
    }

    /// Runs one prompt; returns the steering messages that arrived too late to be delivered.
    async fn one_turn(
        &mut self,
        prompt: String,
        command: Option<&crate::config::custom_commands::Expanded>,
    ) -> Result<Vec<Message>, Failure> {
        let (model, model_name) = self.model_for(command)?;
        let extensions = self.extensions_for(command)?;
        let session = self.recorded()?;
        // A sub-agent cut short by a dead process continues with this turn.
        crate::config::agents::park_interrupted_children(&**self.store.get()?, &session.id)?;
        let (history, parked) = load_parked(&**self.store.get()?, &session.id)?;
        let store: Arc<dyn SessionStore> = self.store.get()?.clone();
        let steering = MessageQueue::new();
        let reader = SteeringReader::start(steering.clone(), self.style);
        let resume = parked.map(|mut p| {
            p.steering.push(Message::user(prompt.clone()));
            p
        });
        let result = execute(RunSetup {
            model,
            model_name,
            workspace: self.workspace.clone(),
            policy: ApprovalPolicy::from(self.approve),
            system_prompt: self.system_prompt.clone(),
            reasoning: self.args.reasoning.map(Into::into),
            max_turns: self.args.max_turns.0,
            limits: crate::commands::run::usage_limits(&self.args),
            trace_content: self.args.trace_content,
            json: false,
            store,
            session,
            context: effective_context(&history),
            prompt,
            images: std::mem::take(&mut self.pending_images),
            steering: Some(steering.clone()),
            interactive: Some(self.expand_thinking),
            shell: shell_options(&self.args).jobs(self.jobs.clone()),
            output: None,
            resume,
            mcp: crate::ui::elicitation::in_terminal(crate::mcp::with_elicitation(
                crate::config::files::ConfigFile::load(self.workspace.root(), &self.args.trust)?
                    .mcp_servers(self.workspace.root(), &self.args.mcp)?,
                self.args.elicitation_defaults,
            )),
            compaction: crate::commands::compact::config(&self.args),
            extensions,
            plan_mode: self.args.mode == crate::plan::Mode::Plan,
            checkpoints: !self.args.no_checkpoints,
        })
        .await;
        self.typed_ahead = reader.stop();
        let report = result?;
        self.after_turn(&report).await;
        Ok(steering.take(QueueMode::All))
    }

    /// The extension points of one prompt, with a custom command's allowed tools.
    fn extensions_for(
        &self,
        command: Option<&crate::config::custom_commands::Expanded>,
    ) -> Result<Arc<crate::config::extensions::Extensions>, Failure> {
        let root = self.workspace.root();
        let mut extensions =
            crate::config::extensions::Extensions::load(root, self.args.trust.applies_to(root))?;
        if let Some(command) = command {
            extensions.allow_for_prompt(&command.allowed_tools)?;
        }
        Ok(Arc::new(extensions))
    }

    /// What the screen shows after a turn (cancellation, errors, the summary line, a plan to
    /// act on); the session's metadata is read again.
    async fn after_turn(&mut self, report: &crate::commands::run::RunReport) {
        let thinking = report.renderer.last_thinking();
        if !thinking.is_empty() {
            self.last_thinking = thinking;
        }
        if report.interrupted {
            println!("{}", self.style.yellow("(turn cancelled)"));
        }
        if let Some(error) = &report.store_error {
            eprintln!("agentloop: {error}");
        }
        if let Some(error) = crate::commands::run::model_error(report) {
            let endpoint =
                crate::hints::Endpoint::of(self.spec.provider, self.args.base_url.as_deref());
            let line = visible_line(&crate::hints::explain(error, &endpoint));
            println!("{}", self.style.red(&line));
        }
        let line = summary_line(&report.totals, None);
        println!("{}", self.style.dim(&line));
        self.offer_plan(report).await;
        if let Some(info) = self.store.get().ok().and_then(|s| s.info(&self.id).ok()) {
            self.session = Some(info);
        }
    }

    /// The model of one prompt: a custom command's `model` (unless `--model` was given; noted
    /// on the screen, since the chat's model is not changed by it), else the chat's.
    fn model_for(
        &self,
        command: Option<&crate::config::custom_commands::Expanded>,
    ) -> Result<(Arc<dyn Model>, String), Failure> {
        let wanted = command.and_then(|c| c.model.as_deref());
        match wanted {
            Some(id) if !self.args.explicit.model => {
                let spec = ModelSpec::parse(id)?;
                let model = build_model(&spec, self.args.base_url.as_deref())?;
                println!(
                    "{}",
                    self.style
                        .dim(&format!("model for this command: {}", visible_line(id)))
                );
                Ok((model, spec.name))
            }
            _ => Ok((self.model.clone(), self.spec.name.clone())),
        }
    }

    /// In plan mode, after a turn that set a plan: asks whether to accept it; yes switches
    /// back to the normal mode (every tool, the shell in its `--sandbox` mode).
    async fn offer_plan(&mut self, report: &crate::commands::run::RunReport) {
        let planned = report
            .outcome
            .as_ref()
            .ok()
            .and_then(|o| agentloop::builtin::Plan::latest(o.new_messages()));
        if self.args.mode != crate::plan::Mode::Plan || planned.is_none() {
            return;
        }
        if let Some(line) = ask_line("Accept this plan and leave plan mode? [y/N] ").await {
            if matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
                self.args.mode = crate::plan::Mode::Normal;
                println!(
                    "plan accepted: normal mode (every tool; the next message starts the work)"
                );
                return;
            }
        }
        println!("still in plan mode (/plan off leaves it)");
    }

    /// A slash command; `false` ends the conversation.
    async fn command(&mut self, command: &str) -> Result<bool, Failure> {
        let (name, rest) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(n, r)| (n, r.trim()));
        match name {
            "exit" | "quit" => return Ok(false),
            "help" => self.help(),
            "jobs" => crate::ui::render::out(&crate::jobs::listing(&self.jobs)),
            "plan" => self.set_plan_mode(rest != "off"),
            "skills" => {
                let trusted = self.args.trust.applies_to(self.workspace.root());
                let (skills, _) = crate::config::skills::load(self.workspace.root(), trusted);
                crate::ui::render::out(&crate::config::skills::listing(&skills));
            }
            "model" if rest.is_empty() => {
                println!("model: {}", visible_line(&self.args.target.model))
            }
            "model" => self.switch_model(rest)?,
            "approve" if rest.is_empty() => println!("approve: {}", approve_name(self.approve)),
            "approve" => self.set_approval(rest),
            "thinking" => self.thinking(rest),
            "cost" => self.cost()?,
            "diff" => self.diff(),
            "output" => crate::outputs::open(&**self.store.get()?, &self.id, rest, self.style),
            "rewind" => {
                if let Err(e) = self.rewind(rest).await {
                    println!("{}", self.style.red(&e.to_string()));
                }
            }
            "compact" => self.compact().await?,
            "clear" => self.clear(),
            "sessions" => self.list_sessions(rest == "all")?,
            "image" => self.attach_image(rest),
            "resume" if rest.is_empty() => println!("{}", self.style.red("/resume ID")),
            "resume" => {
                if let Err(e) = self.resume(rest) {
                    println!("{}", self.style.red(&e.to_string()));
                }
            }
            // An MCP server's prompt: the turn expands it (crate::mcp::expand_prompt).
            _ if agentloop_mcp::is_prompt_command(&format!("/{command}")) => {
                if let Err(e) = Box::pin(self.turn(format!("/{command}"))).await {
                    println!("{}", self.style.red(&e.to_string()));
                }
            }
            // `command` is the line without its slash; `expand` reads `/NAME ARGS`.
            other => {
                match crate::config::custom_commands::expand(
                    &self.custom_commands().0,
                    &format!("/{command}"),
                ) {
                    Some(expanded) => {
                        self.turn_as(expanded.prompt.clone(), Some(&expanded))
                            .await?
                    }
                    None => println!(
                        "{}",
                        self.style.red(&format!(
                            "unknown command /{}; /help lists them",
                            visible_line(other)
                        ))
                    ),
                }
            }
        }
        Ok(true)
    }

    /// `/help`: the built-in commands, then the custom ones.
    fn help(&self) {
        println!("{HELP}");
        let (commands, _) = self.custom_commands();
        for line in crate::config::custom_commands::help_lines(&commands) {
            println!("{line}");
        }
    }

    /// `/plan` (on) and `/plan off`.
    fn set_plan_mode(&mut self, on: bool) {
        self.args.mode = if on {
            crate::plan::Mode::Plan
        } else {
            crate::plan::Mode::Normal
        };
        println!("mode: {}", if on { "plan" } else { "normal" });
    }

    /// `/model ID`: later turns use that model, and the session records it for its next
    /// `--continue`.
    fn switch_model(&mut self, id: &str) -> Result<(), Failure> {
        let built = ModelSpec::parse(id)
            .and_then(|spec| Ok((build_model(&spec, self.args.base_url.as_deref())?, spec)));
        match built {
            Ok((model, spec)) => {
                self.model = model;
                self.spec = spec;
                self.args.target.model = id.to_owned();
                let settings = self.settings();
                // Not recorded yet: the session is created with the settings of that moment.
                if let Some(session) = &mut self.session {
                    store_if_changed(&**self.store.get()?, session, settings)?;
                }
                println!("model: {}", visible_line(id));
            }
            Err(e) => println!("{}", self.style.red(&e.to_string())),
        }
        Ok(())
    }

    /// `/approve ask|deny|allow`.
    fn set_approval(&mut self, name: &str) {
        match <ApproveArg as clap::ValueEnum>::from_str(name, true) {
            Ok(ApproveArg::Defer) | Err(_) => println!(
                "{}",
                self.style
                    .red("use /approve ask, /approve deny or /approve allow")
            ),
            Ok(policy) => {
                self.approve = policy;
                println!("approve: {}", approve_name(policy));
            }
        }
    }

    /// `/thinking on|off`, or the last reply's thinking.
    fn thinking(&mut self, setting: &str) {
        match setting {
            "on" => {
                self.expand_thinking = true;
                println!("thinking: shown in full");
            }
            "off" => {
                self.expand_thinking = false;
                println!("thinking: collapsed to one line");
            }
            _ if self.last_thinking.is_empty() => println!("(no thinking yet)"),
            _ => println!(
                "{}",
                self.style
                    .dim(crate::ui::safe_text::visible(&self.last_thinking).as_ref())
            ),
        }
    }

    /// `/compact`: summarises the older turns of the session now.
    async fn compact(&mut self) -> Result<(), Failure> {
        if self.session.is_none() {
            println!("nothing to compact: the session is still short");
            return Ok(());
        }
        let hooks = crate::config::extensions::Extensions::load(
            self.workspace.root(),
            self.args.trust.applies_to(self.workspace.root()),
        )?
        .hooks;
        let compactor =
            crate::config::hooks::for_run(&hooks, &self.id, self.workspace.root(), false)
                .compactor(
                    Arc::new(agentloop::agent::compaction::ModelCompactor),
                    agentloop::agent::command_hooks::CompactionTrigger::Manual,
                );
        let line = crate::commands::compact::compact_session(
            &**self.store.get()?,
            &self.id,
            self.model.as_ref(),
            &self.spec.name,
            self.args.keep_turns,
            compactor.as_ref(),
        )
        .await?;
        println!(
            "{}",
            line.as_deref()
                .unwrap_or("nothing to compact: the session is still short")
        );
        Ok(())
    }

    /// `/clear`: a new session, recorded with its first prompt (the one left is discarded
    /// when the model never answered).
    fn clear(&mut self) {
        self.leave_session();
        self.id = uuid::Uuid::new_v4().to_string();
        self.session = None;
        self._lock = None;
        println!("new session {}", visible_line(&self.id));
    }

    /// `/sessions [all]`: this workspace's recent sessions, or every workspace's.
    fn list_sessions(&self, all: bool) -> Result<(), Failure> {
        let mut filter = SessionFilter::new().limit(15);
        if !all {
            filter = filter.workspace(self.workspace.root().to_string_lossy());
        }
        let sessions = self.store.get()?.list_where(&filter)?;
        if sessions.is_empty() {
            println!("(no sessions here yet; `/sessions all` lists every workspace's)");
        }
        for info in sessions {
            let model = info.settings.model.as_deref().or(info.model.as_deref());
            println!(
                "{}  {}  {:>3} turns  {}  {}",
                visible_line(&info.id),
                format_time(info.updated_ms),
                info.stats.turns,
                crate::ui::render::one_line(model.unwrap_or("-"), 24),
                crate::ui::render::one_line(info.title.as_deref().unwrap_or("(untitled)"), 60)
            );
        }
        Ok(())
    }

    /// Leaving the current session (for another one, or at the end): one this conversation
    /// created and the model never answered in is deleted (see [`discard_if_unanswered`]).
    fn leave_session(&mut self) {
        if std::mem::take(&mut self.created) {
            if let Ok(store) = self.store.get() {
                discard_if_unanswered(&**store, &self.id);
            }
        }
    }

    /// The custom commands (`crate::config::custom_commands`) for this workspace.
    fn custom_commands(
        &self,
    ) -> (
        Vec<crate::config::custom_commands::CustomCommand>,
        Vec<String>,
    ) {
        let trusted = self.args.trust.applies_to(self.workspace.root());
        crate::config::custom_commands::load(self.workspace.root(), trusted)
    }

    /// What the current session runs with.
    fn settings(&self) -> SessionSettings {
        recorded(
            &self.spec,
            self.args.base_url.as_deref(),
            self.args.reasoning,
            self.workspace.root(),
        )
    }

    /// `/resume ID`: switch to another session, with its stored model, provider, base URL and
    /// reasoning (the flags given to agentloop still win). Nothing changes when it fails.
    fn resume(&mut self, wanted: &str) -> Result<(), Failure> {
        let info = crate::commands::sessions::resolve(&**self.store.get()?, wanted)?;
        if info.id == self.id {
            println!("already in session {}", visible_line(&info.id));
            return Ok(());
        }
        let mut choice = self.flags.clone();
        if let Some(note) = restore(&info.settings, self.args.explicit, &mut choice) {
            println!("{}", self.style.yellow(&note));
        }
        let (spec, model) = choice.build(&self.args)?;
        let lock = self
            .store
            .get()?
            .lock_session(&info.id, SESSION_LOCK_WAIT)?;
        let mut info = self.store.get()?.info(&info.id)?;
        (
            self.args.target.model,
            self.args.base_url,
            self.args.reasoning,
        ) = (choice.model, choice.base_url, choice.reasoning);
        self.spec = spec;
        self.model = model;
        let settings = self.settings();
        store_if_changed(&**self.store.get()?, &mut info, settings)?;
        self.leave_session();
        println!(
            "resumed {} ({} messages) · model {}",
            visible_line(&info.id),
            info.message_count,
            visible_line(&self.args.target.model)
        );
        self.id = info.id.clone();
        self.session = Some(info);
        self._lock = Some(lock);
        self.created = false;
        self.show_earlier();
        Ok(())
    }

    /// `/diff`: what this session changed in the workspace, from its checkpoints.
    fn diff(&self) {
        let shown = crate::commands::checkpoints::store()
            .and_then(|store| crate::commands::checkpoints::session_diff(&store, &self.id));
        match shown {
            Ok(text) if text.is_empty() => println!("(no changes recorded in this session)"),
            Ok(text) => crate::ui::render::out(&text),
            Err(e) => println!("{}", self.style.red(&e.to_string())),
        }
    }

    /// `/rewind [ID]`: without an id, lists the checkpoints and asks for one; then puts the
    /// files back and continues in a fork of the conversation from before that call.
    async fn rewind(&mut self, given: &str) -> Result<(), Failure> {
        let Some(session) = self.session.clone() else {
            println!("(no checkpoints in this session yet)");
            return Ok(());
        };
        let mut wanted = given.to_owned();
        if wanted.is_empty() {
            let listing = crate::commands::checkpoints::listing(&session.id)?;
            if listing.is_empty() {
                println!("(no checkpoints in this session yet)");
                return Ok(());
            }
            crate::ui::render::out(&listing);
            wanted = ask_line("Rewind to which checkpoint? (id; Enter cancels) ")
                .await
                .map(|line| line.trim().to_owned())
                .unwrap_or_default();
            if wanted.is_empty() {
                println!("nothing rewound");
                return Ok(());
            }
        }
        let fork =
            crate::commands::checkpoints::rewind_session(&**self.store.get()?, &session, &wanted)?;
        let lock = self
            .store
            .get()?
            .lock_session(&fork.id, SESSION_LOCK_WAIT)?;
        self.leave_session();
        self.id = fork.id.clone();
        self.session = Some(fork);
        self._lock = Some(lock);
        self.created = false;
        println!("now in session {}", visible_line(&self.id));
        Ok(())
    }

    /// `/cost`: the session's tokens and cost (its running totals).
    fn cost(&self) -> Result<(), Failure> {
        // Not recorded yet: nothing spent.
        let stats = match &self.session {
            Some(_) => self.store.get()?.info(&self.id)?.stats,
            None => Default::default(),
        };
        let usage = stats.usage;
        let cost = usage
            .cost_usd
            .map_or_else(|| "cost unknown".to_owned(), |c| format!("${c:.4}"));
        println!(
            "session {}: {} model replies, {} in / {} out tokens ({} cached), {cost}",
            visible_line(&self.id),
            stats.turns,
            thousands(usage.input_tokens),
            thousands(usage.output_tokens),
            thousands(usage.cache_read_tokens)
        );
        Ok(())
    }
}

impl Drop for Chat {
    /// Every way out of a conversation (`/exit`, Ctrl-D, an error) leaves no empty session.
    fn drop(&mut self) {
        self.leave_session();
    }
}

/// The policy's name as `--approve` spells it.
fn approve_name(policy: ApproveArg) -> String {
    clap::ValueEnum::to_possible_value(&policy)
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// A new session with these settings (and this id, when one was chosen), locked.
fn new_session(
    store: &dyn SessionStore,
    settings: SessionSettings,
    id: Option<String>,
) -> Result<(SessionInfo, SessionLock), Failure> {
    let mut new = NewSession::new().settings(settings);
    let named = id.is_some();
    if let Some(id) = id {
        new = new.id(id);
    }
    let info = store.create(new)?;
    if named {
        eprintln!("agentloop: new session {}", visible_line(&info.id));
    }
    let lock = store.lock_session(&info.id, SESSION_LOCK_WAIT)?;
    Ok((info, lock))
}
