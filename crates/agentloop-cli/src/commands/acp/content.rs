//! A `session/prompt`'s content blocks as the user message the model gets: text as is,
//! resource links as a line naming the file (the model reads it with its tools), embedded text
//! resources inline with their URI, images as image parts. Audio and binary resources are not
//! accepted (and not advertised).

use agent_client_protocol::{ContentBlock, EmbeddedResourceResource};
use agentloop::transcript::{ImagePart, Part};
use base64::Engine;

/// The text and images of a prompt, or a one-line reason it cannot be used.
pub struct Prompt {
    /// The text blocks, links and embedded resources, in order.
    pub text: String,
    /// The images.
    pub images: Vec<ImagePart>,
}

impl Prompt {
    /// Reads `blocks`.
    pub fn from_blocks(blocks: Vec<ContentBlock>) -> Result<Prompt, String> {
        let mut pieces: Vec<String> = Vec::new();
        let mut images = Vec::new();
        for block in blocks {
            match block {
                ContentBlock::Text(text) => pieces.push(text.text),
                ContentBlock::ResourceLink(link) => {
                    pieces.push(format!("[{}]({})", link.name, link.uri));
                }
                ContentBlock::Resource(resource) => match resource.resource {
                    EmbeddedResourceResource::TextResourceContents(contents) => {
                        pieces.push(format!(
                            "<resource uri=\"{}\">\n{}\n</resource>",
                            contents.uri, contents.text
                        ))
                    }
                    _ => return Err("binary embedded resources are not supported".into()),
                },
                ContentBlock::Image(image) => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(image.data.as_bytes())
                        .map_err(|e| format!("an image is not valid base64: {e}"))?;
                    let part = ImagePart::from_bytes(&bytes).ok_or_else(|| {
                        "an image is not a PNG, JPEG, GIF or WebP image".to_owned()
                    })?;
                    images.push(part);
                }
                _ => return Err("audio prompts are not supported".into()),
            }
        }
        Ok(Prompt {
            text: pieces.join("\n"),
            images,
        })
    }

    /// The parts of the user message: the text, then the images.
    pub fn parts(&self) -> Vec<Part> {
        let mut parts = vec![Part::text(self.text.clone())];
        parts.extend(self.images.iter().cloned().map(Part::Image));
        parts
    }
}
