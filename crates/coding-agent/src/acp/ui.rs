//! Extension and permission dialogs over ACP. `confirm` and `select` (an extension's
//! `ctx.ui.confirm`/`select`, and the tool permission policy's `ask`) become
//! `session/request_permission`: a confirm offers "Yes" (allow once) and "No" (reject once), a
//! select one option per choice (the permission policy's "Allow once"/"Always allow"/"Deny" with
//! their ACP kinds, other choices as allow-once). The answer goes back as an RPC client's
//! `extension_ui_response` would; a cancelled request, or a client that fails to answer,
//! dismisses the dialog. `notify` becomes an agent message. `input` and `editor` become an
//! `elicitation/create` form when the client announced forms (`clientCapabilities.elicitation
//! .form`): one required string field `value` (titled with the dialog's title; an input's
//! placeholder as its description, an editor's prefill as its default); `accept` answers the
//! value, `decline`/`cancel` (or a failed request) dismisses the dialog. Without forms they
//! resolve to their default at once (dismissed), as in print mode. Status, widget and title
//! updates are dropped.

use super::Connection;
use crate::agent_session::permission::{ALLOW_ALWAYS, DENY};
use crate::agent_session::SessionServices;
use crate::protocol::rpc::ExtensionUiRequest;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, CreateElicitationRequest, ElicitationAction,
    ElicitationContentValue, ElicitationFormMode, ElicitationSchema, ElicitationSessionScope,
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionId, SessionNotification, SessionUpdate, StringPropertySchema, TextContent,
    ToolCallUpdate, ToolCallUpdateFields,
};

/// How a dialog was answered: `(value, confirmed, cancelled)` of `extension_ui_response`.
type Answer = (Option<String>, Option<bool>, Option<bool>);

const DISMISSED: Answer = (None, None, Some(true));

/// The field of an `input`/`editor` elicitation form.
const VALUE_FIELD: &str = "value";

/// Handles one UI request of session `session` (`None`: no session open yet, so dialogs are
/// dismissed); `forms`: the client takes elicitation forms (module doc).
pub(super) fn request(
    cx: &Connection,
    session: Option<SessionId>,
    req: ExtensionUiRequest,
    services: &SessionServices,
    forms: bool,
) {
    match (req.method.as_str(), session) {
        ("input" | "editor", Some(session)) if forms => {
            let (cx, services) = (cx.clone(), services.clone());
            tokio::spawn(async move {
                let answer = elicit(&cx, session, &req).await;
                respond(&services, req.id, answer);
            });
        }
        ("confirm" | "select", Some(session)) => {
            let (cx, services) = (cx.clone(), services.clone());
            tokio::spawn(async move {
                let answer = ask(&cx, session, &req).await;
                respond(&services, req.id, answer);
            });
        }
        ("notify", Some(session)) => {
            let text = format!("\n{}\n", req.message.unwrap_or_default());
            let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
            let update = SessionUpdate::AgentMessageChunk(chunk);
            let _ = cx.send_notification(SessionNotification::new(session, update));
        }
        ("confirm" | "select" | "input" | "editor", _) => respond(services, req.id, DISMISSED),
        _ => {}
    }
}

/// Puts a confirm or select to the client and reads its choice.
async fn ask(cx: &Connection, session: SessionId, req: &ExtensionUiRequest) -> Answer {
    let confirm = req.method == "confirm";
    let choices: Vec<String> = if confirm {
        vec!["Yes".into(), "No".into()]
    } else {
        req.options.clone().unwrap_or_default()
    };
    let options = choices
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let kind = match c.as_str() {
                _ if confirm && i == 1 => PermissionOptionKind::RejectOnce,
                ALLOW_ALWAYS => PermissionOptionKind::AllowAlways,
                DENY => PermissionOptionKind::RejectOnce,
                _ => PermissionOptionKind::AllowOnce,
            };
            PermissionOption::new(i.to_string(), c.clone(), kind)
        })
        .collect();
    let mut title = req.title.clone().unwrap_or_default();
    if let Some(m) = &req.message {
        title = format!("{title}\n{m}");
    }
    let tool_call = ToolCallUpdate::new(req.id.clone(), ToolCallUpdateFields::new().title(title));
    let sent = cx.send_request(RequestPermissionRequest::new(session, tool_call, options));
    let outcome = match sent.block_task().await {
        Ok(response) => response.outcome,
        Err(_) => return DISMISSED,
    };
    let RequestPermissionOutcome::Selected(selected) = outcome else {
        return DISMISSED;
    };
    let index: Option<usize> = selected.option_id.0.parse().ok();
    match (confirm, index) {
        (true, Some(i)) => (None, Some(i == 0), None),
        (false, Some(i)) if i < choices.len() => (Some(choices[i].clone()), None, None),
        _ => DISMISSED,
    }
}

/// Puts an input or editor dialog to the client as an elicitation form and reads its value.
async fn elicit(cx: &Connection, session: SessionId, req: &ExtensionUiRequest) -> Answer {
    let title = req.title.clone().unwrap_or_default();
    let field = StringPropertySchema::new().title(title.clone());
    let field = if req.method == "editor" {
        field.default_value(req.prefill.clone())
    } else {
        field.description(req.placeholder.clone())
    };
    let schema = ElicitationSchema::new().property(VALUE_FIELD, field, true);
    let mode = ElicitationFormMode::new(ElicitationSessionScope::new(session), schema);
    let sent = cx.send_request(CreateElicitationRequest::new(mode, title));
    let Ok(response) = sent.block_task().await else {
        return DISMISSED;
    };
    let ElicitationAction::Accept(accepted) = response.action else {
        return DISMISSED;
    };
    match accepted.content.and_then(|mut c| c.remove(VALUE_FIELD)) {
        Some(ElicitationContentValue::String(value)) => (Some(value), None, None),
        _ => DISMISSED,
    }
}

/// Delivers an answer: to the permission gate when the dialog is one of its own, else to the
/// extension host.
fn respond(services: &SessionServices, id: String, (value, confirmed, cancelled): Answer) {
    let ours = services
        .permissions
        .as_ref()
        .is_some_and(|g| g.answer(&id, value.clone(), cancelled));
    if let (false, Some(ext)) = (ours, services.extensions.as_ref()) {
        ext.ui_response(id, value, confirmed, cancelled);
    }
}
