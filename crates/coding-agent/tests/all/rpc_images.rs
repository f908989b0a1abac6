//! Images on their way to the model (issue 10): the `read` tool and RPC prompt images are
//! decoded, resized to 2000×2000 or the model's `inputLimits`, annotated with the dimension
//! note, replaced by a placeholder for text-only models, honour `images.autoResize` and
//! `images.blockImages`; corrupt images are refused; an image the provider rejected is not
//! sent again. Every check looks at what the fake server received.

use crate::common::*;
use base64::Engine;
use pi_fakellm::{RecordedRequest, Script, Turn};
use serde_json::{json, Value};

/// A real PNG of `w`×`h` pixels (a colour gradient).
pub fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([
            (x * 7 % 256) as u8,
            (y * 5 % 256) as u8,
            ((x + y) % 256) as u8,
        ])
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// A real JPEG of `w`×`h` pixels.
pub fn jpeg(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(
            &mut std::io::Cursor::new(&mut out),
            image::ImageFormat::Jpeg,
        )
        .unwrap();
    out
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Width and height of base64 image data.
fn dims(data: &str) -> (u32, u32) {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    let img = image::load_from_memory(&bytes).unwrap();
    (img.width(), img.height())
}

/// `(mime, base64)` of every `image_url` part of an OpenAI request.
fn openai_images(req: &RecordedRequest) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in req.body["messages"].as_array().unwrap() {
        let Some(parts) = m["content"].as_array() else {
            continue;
        };
        for p in parts {
            if let Some(url) = p["image_url"]["url"].as_str() {
                let rest = url.strip_prefix("data:").unwrap();
                let (mime, data) = rest.split_once(";base64,").unwrap();
                out.push((mime.to_string(), data.to_string()));
            }
        }
    }
    out
}

/// All text of the request's messages (user parts and tool contents), joined by newlines.
fn all_texts(req: &RecordedRequest) -> String {
    let mut out = Vec::new();
    for m in req.body["messages"].as_array().unwrap() {
        match &m["content"] {
            Value::String(s) => out.push(s.clone()),
            Value::Array(parts) => {
                for p in parts {
                    if let Some(t) = p["text"].as_str() {
                        out.push(t.to_string());
                    }
                    if let Some(c) = p["content"].as_array() {
                        for b in c {
                            if let Some(t) = b["text"].as_str() {
                                out.push(t.to_string());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out.join("\n")
}

/// The vision model of the fake (`fake-openai/fake-gpt`) with `inputLimits` set.
fn with_limits(root: &RunRoot, port: u16, limits: Value) {
    let mut models = models_json(port);
    models["providers"]["fake-openai"]["models"][0]["inputLimits"] = limits;
    root.write_agent_file("models.json", &models);
}

fn prompt(agent: &mut RpcAgent, id: &str, text: &str, images: Vec<(&str, String)>) -> Value {
    let images: Vec<Value> = images
        .into_iter()
        .map(|(mime, data)| json!({"type": "image", "data": data, "mimeType": mime}))
        .collect();
    agent.request(json!({"id": id, "type": "prompt", "message": text, "images": images}))
}

/// The first user message of `get_messages`.
fn first_user(agent: &mut RpcAgent) -> Value {
    let msgs = agent.request(json!({"id": "m", "type": "get_messages"}));
    msgs["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap()
}

fn settled_after(agent: &RpcAgent, from: usize) {
    agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
}

#[test]
fn read_tool_resizes_to_the_model_input_limits_with_the_dimension_note() {
    let script = Script::new([
        Turn::tool_call("read", json!({"path": "big.png"})),
        Turn::text("seen"),
    ]);
    let (fake, root) = setup(script, "fake-openai/fake-gpt");
    with_limits(
        &root,
        fake.port(),
        json!({"images": {"resize": {"maxWidth": 100, "maxHeight": 100}}}),
    );
    std::fs::write(root.cwd.join("big.png"), png(300, 150)).unwrap();
    let mut agent = root.spawn();
    let r = prompt(&mut agent, "p1", "look", vec![]);
    assert_eq!(r["success"], true, "{r}");
    settled_after(&agent, 0);
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 2);
    let images = openai_images(&reqs[1]);
    assert_eq!(images.len(), 1, "{}", reqs[1].body_text());
    assert_eq!(dims(&images[0].1), (100, 50));
    let texts = all_texts(&reqs[1]);
    assert!(
        texts.contains(
            "Read image file [image/png]\n[Image: original 300x150, displayed at 100x50. Multiply coordinates by 3.00 to map to original image.]"
        ) || texts.contains(
            "Read image file [image/jpeg]\n[Image: original 300x150, displayed at 100x50. Multiply coordinates by 3.00 to map to original image.]"
        ),
        "{texts}"
    );
    let end = agent.wait_event("tool_execution_end");
    assert_eq!(end["result"]["structuredContent"]["type"], "image");
    assert_eq!(end["isError"], false);
}

#[test]
fn prompt_images_fit_2000_by_2000_by_default_and_small_ones_pass_unchanged() {
    let (fake, root) = setup(
        Script::new([Turn::text("a"), Turn::text("b")]),
        "fake-openai/fake-gpt",
    );
    let mut agent = root.spawn();
    let wide = png(2100, 20);
    let r = prompt(&mut agent, "p1", "wide", vec![("image/png", b64(&wide))]);
    assert_eq!(r["success"], true, "{r}");
    settled_after(&agent, 0);
    let small = b64(&jpeg(8, 8));
    let from = agent.len();
    prompt(
        &mut agent,
        "p2",
        "small",
        vec![("image/jpeg", small.clone())],
    );
    settled_after(&agent, from);
    let reqs = fake.llm_requests();
    let first = openai_images(&reqs[0]);
    assert_eq!(dims(&first[0].1), (2000, 19));
    assert!(
        all_texts(&reqs[0]).contains("wide\n\n[Image: original 2100x20, displayed at 2000x19. Multiply coordinates by 1.05 to map to original image.]"),
        "{}",
        all_texts(&reqs[0])
    );
    let second = openai_images(&reqs[1]);
    assert_eq!(
        second.last().unwrap(),
        &("image/jpeg".to_string(), small),
        "sent byte for byte"
    );
    // The transcript keeps what was sent, the note included.
    let user = first_user(&mut agent);
    assert!(user["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("displayed at 2000x19"));
}

#[test]
fn auto_resize_off_sends_the_image_as_given() {
    let (fake, root) = setup(Script::new([Turn::text("a")]), "fake-openai/fake-gpt");
    with_limits(
        &root,
        fake.port(),
        json!({"images": {"resize": {"maxWidth": 10, "maxHeight": 10}}}),
    );
    root.merge_settings(json!({"images": {"autoResize": false}}));
    let mut agent = root.spawn();
    let data = b64(&png(40, 30));
    prompt(&mut agent, "p1", "as is", vec![("image/png", data.clone())]);
    settled_after(&agent, 0);
    let reqs = fake.llm_requests();
    assert_eq!(
        openai_images(&reqs[0]),
        vec![("image/png".to_string(), data)]
    );
    assert!(!all_texts(&reqs[0]).contains("[Image:"));
}

#[test]
fn corrupt_images_are_refused_and_never_sent() {
    let script = Script::new([
        Turn::tool_call("read", json!({"path": "broken.png"})),
        Turn::text("done"),
    ]);
    let (fake, root) = setup(script, "fake-openai/fake-gpt");
    let mut broken = png(20, 20);
    broken.truncate(40);
    std::fs::write(root.cwd.join("broken.png"), &broken).unwrap();
    let mut agent = root.spawn();
    let r = prompt(&mut agent, "p0", "bad", vec![("image/png", b64(&broken))]);
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"].as_str().unwrap().starts_with("Invalid image 1:"),
        "{r}"
    );
    let r = prompt(
        &mut agent,
        "p0b",
        "bad",
        vec![("image/png", "not base64!".into())],
    );
    assert_eq!(r["success"], false, "{r}");
    assert!(
        fake.llm_requests().is_empty(),
        "a refused prompt sends nothing"
    );

    let from = agent.len();
    prompt(&mut agent, "p1", "read it", vec![]);
    settled_after(&agent, from);
    let end = agent.wait_event("tool_execution_end");
    assert_eq!(end["isError"], true, "{end}");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Could not read image file "), "{text}");
    let reqs = fake.llm_requests();
    assert!(openai_images(&reqs[1]).is_empty());
}

#[test]
fn text_only_models_get_the_placeholder() {
    let script = Script::new([
        Turn::tool_call("read", json!({"path": "pic.png"})),
        Turn::text("done"),
    ]);
    // fake-gpt-mini takes text only.
    let (fake, root) = setup(script, "fake-openai/fake-gpt-mini");
    std::fs::write(root.cwd.join("pic.png"), png(4, 4)).unwrap();
    let mut agent = root.spawn();
    prompt(&mut agent, "p1", "hi", vec![("image/png", b64(&png(2, 2)))]);
    settled_after(&agent, 0);
    let reqs = fake.llm_requests();
    assert!(openai_images(&reqs[0]).is_empty());
    assert!(openai_images(&reqs[1]).is_empty());
    let texts = all_texts(&reqs[1]);
    assert!(
        texts.contains("(image omitted: model does not support images)"),
        "{texts}"
    );
    assert!(
        texts.contains("(tool image omitted: model does not support images)"),
        "{texts}"
    );
    let end = agent.wait_event("tool_execution_end");
    assert_eq!(
        end["result"]["details"]["imageUnsupportedByModel"],
        "fake-gpt-mini"
    );
}

#[test]
fn block_images_replaces_every_image() {
    let (fake, root) = setup(Script::new([Turn::text("a")]), "fake-openai/fake-gpt");
    root.merge_settings(json!({"images": {"blockImages": true}}));
    let mut agent = root.spawn();
    let img = b64(&png(2, 2));
    prompt(
        &mut agent,
        "p1",
        "two",
        vec![("image/png", img.clone()), ("image/png", img)],
    );
    settled_after(&agent, 0);
    let req = &fake.llm_requests()[0];
    assert!(openai_images(req).is_empty());
    let parts = req.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .clone();
    assert_eq!(
        parts,
        json!([{"type": "text", "text": "two"}, {"type": "text", "text": "Image reading is disabled."}])
    );
}

#[test]
fn an_image_the_provider_rejected_is_not_sent_again() {
    let rejection = json!({"error": {"message": "Invalid image data: could not process image", "type": "invalid_request_error", "code": "invalid_image"}});
    let script = Script::new([
        Turn::error(400).error_body(400, rejection),
        Turn::text("ok"),
    ]);
    let (fake, root) = setup(script, "fake-openai/fake-gpt");
    let mut agent = root.spawn();
    let img = b64(&png(3, 3));
    prompt(&mut agent, "p1", "look", vec![("image/png", img)]);
    settled_after(&agent, 0);
    let from = agent.len();
    prompt(&mut agent, "p2", "and now?", vec![]);
    settled_after(&agent, from);
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(openai_images(&reqs[0]).len(), 1);
    assert!(
        openai_images(&reqs[1]).is_empty(),
        "{}",
        reqs[1].body_text()
    );
    assert!(all_texts(&reqs[1]).contains("(image omitted: the provider rejected it)"));
    // The transcript still holds the image.
    assert_eq!(first_user(&mut agent)["content"][1]["type"], "image");
}

/// `inputLimits.maxRequestBytes`, `images.maxPerMessage` and `images.maxPerRequest` are
/// declared only: upstream 1.6 "does not yet rewrite or reject history based on them"
/// (docs/models.md), and on the fake server it sends all three images of a prompt to a model
/// allowing one per message and two per request (a request far over 300 bytes), and all five
/// in the next request, with no error or note. So does pi.
#[test]
fn image_count_and_request_size_limits_are_declared_only_as_upstream() {
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two")]),
        "fake-openai/fake-gpt",
    );
    with_limits(
        &root,
        fake.port(),
        json!({"maxRequestBytes": 300, "images": {"maxPerMessage": 1, "maxPerRequest": 2}}),
    );
    let mut agent = root.spawn();
    let first: Vec<String> = [(4, 4), (5, 5), (6, 6)]
        .iter()
        .map(|&(w, h)| b64(&png(w, h)))
        .collect();
    let images = first.iter().map(|d| ("image/png", d.clone())).collect();
    let r = prompt(&mut agent, "p1", "three images", images);
    assert_eq!(r["success"], true, "{r}");
    settled_after(&agent, 0);
    let from = agent.len();
    let second: Vec<String> = [(7, 7), (8, 8)]
        .iter()
        .map(|&(w, h)| b64(&png(w, h)))
        .collect();
    let images = second.iter().map(|d| ("image/png", d.clone())).collect();
    let r = prompt(&mut agent, "p2", "again", images);
    assert_eq!(r["success"], true, "{r}");
    settled_after(&agent, from);

    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 2, "{}", agent.dump());
    assert!(reqs[0].body_text().len() > 300);
    let sent = |req: &RecordedRequest| -> Vec<String> {
        openai_images(req).into_iter().map(|(_, d)| d).collect()
    };
    assert_eq!(sent(&reqs[0]), first, "every image, byte for byte");
    let all: Vec<String> = first.iter().chain(&second).cloned().collect();
    assert_eq!(sent(&reqs[1]), all);
    let texts = all_texts(&reqs[1]);
    assert!(!texts.contains("[Image"), "no placeholder or note: {texts}");
    // The events carry every image too, and no run failed.
    let users: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "message_end" && v["message"]["role"] == "user")
        .collect();
    let counts: Vec<usize> = users
        .iter()
        .map(|u| {
            u["message"]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["type"] == "image")
                .count()
        })
        .collect();
    assert_eq!(counts, [3, 2]);
    assert!(agent
        .events()
        .iter()
        .filter(|v| kind(v) == "message_end" && v["message"]["role"] == "assistant")
        .all(|v| v["message"]["stopReason"] == "stop"));
}

/// Limits that are not integers >= 1 make models.json invalid, as upstream 1.6's schema
/// (pi-ai `ModelInputLimitsSchema`) makes it: the whole file is refused with upstream's
/// messages, so none of its models is available and a prompt fails for want of a model.
/// Recorded from upstream 1.6 on the fake server with the same models.json: `get_state` shows
/// the `unknown` model, `get_available_models` is empty, the prompt fails with
/// `No API key found for the selected model.`
#[test]
fn invalid_image_limits_refuse_models_json_as_upstream() {
    let (fake, root) = setup(Script::new([Turn::text("never")]), "fake-openai/fake-gpt");
    with_limits(
        &root,
        fake.port(),
        json!({"maxRequestBytes": 0, "images": {"maxPerMessage": 2.5, "maxPerRequest": "3"}}),
    );
    let mut agent = root.spawn();
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["data"]["model"]["id"], "unknown", "{state}");
    let models = agent.request(json!({"id": "m", "type": "get_available_models"}));
    assert_eq!(models["data"]["models"], json!([]), "{models}");
    let r = prompt(&mut agent, "p1", "hi", vec![]);
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("No API key found for the selected model."),
        "{r}"
    );
    let stderr = agent.stderr_with("Invalid models.json schema", LIVENESS);
    assert!(
        stderr.contains(
            "Invalid models.json schema:\n  - providers.fake-openai.models.0.inputLimits.maxRequestBytes: must be >= 1\n  - providers.fake-openai.models.0.inputLimits.images.maxPerMessage: must be integer\n  - providers.fake-openai.models.0.inputLimits.images.maxPerRequest: must be integer\n\nFile: "
        ),
        "{stderr}"
    );
    assert!(fake.llm_requests().is_empty());
}
