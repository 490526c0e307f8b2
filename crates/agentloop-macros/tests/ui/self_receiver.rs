use agentloop::tool;

struct Notes;

impl Notes {
    /// Read a note.
    #[tool]
    fn read(&self, name: String) -> String {
        name
    }
}

fn main() {}
