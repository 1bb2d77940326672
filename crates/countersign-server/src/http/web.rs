//! The approver page: static HTML, CSS and JavaScript compiled into the binary, and the
//! cookie-session endpoints it calls.
//!
//! The page is the same bytes for every approval: it carries no data, so a link opened before
//! authentication discloses nothing but what is in the link. Before login the only data endpoint
//! is `/summary` (reference, severity, expiry). After login the approver's session is an
//! `HttpOnly`, `Secure`, `SameSite=Strict` `__Host-` cookie; every state-changing call must also
//! carry the CSRF token derived from it and an `Origin` that is one of the configured origins.
//! Login attempts are rate limited per client address. Every response carries a CSP that allows
//! scripts from this origin only (no inline script), forbids framing, and disables caching.

use super::display::{Display, Sentence, display};
use super::{Body, PathArg};
use crate::error::{ApiError, ErrorCode};
use crate::hints::Hint;
use crate::service::{AppState, AssertionBody, DecisionChallenge, ReviewView};
use crate::store::Session;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use countersign::{ApprovalResult, ApprovalStatus, Decision, b64};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::net::{IpAddr, SocketAddr};

/// The session cookie. `__Host-` makes the browser refuse it unless it is `Secure`, has
/// `Path=/` and no `Domain`, so a sibling subdomain cannot plant or read it.
pub(crate) const SESSION_COOKIE: &str = "__Host-countersign-session";
/// The header carrying the CSRF token on state-changing calls.
pub(crate) const CSRF_HEADER: &str = "x-countersign-csrf";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
    connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const APPROVE_HTML: &str = include_str!("../../assets/approve.html");
const ENROLL_HTML: &str = include_str!("../../assets/enroll.html");
const APPROVE_JS: &str = include_str!("../../assets/approve.js");
const ENROLL_JS: &str = include_str!("../../assets/enroll.js");
const COMMON_JS: &str = include_str!("../../assets/common.js");
const STYLE_CSS: &str = include_str!("../../assets/style.css");
/// The pages' icon. Served at `/favicon.ico` too: a browser that asks there anyway gets it
/// rather than a 404 that would sit in the console as an error.
const ICON_SVG: &str = include_str!("../../assets/icon.svg");

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/approve", get(|| page(APPROVE_HTML)))
        .route("/approve/{id}", get(|| page(APPROVE_HTML)))
        .route("/enroll", get(|| page(ENROLL_HTML)))
        .route("/assets/approve.js", get(|| asset(APPROVE_JS, JS)))
        .route("/assets/enroll.js", get(|| asset(ENROLL_JS, JS)))
        .route("/assets/common.js", get(|| asset(COMMON_JS, JS)))
        .route("/assets/style.css", get(|| asset(STYLE_CSS, CSS)))
        .route("/assets/icon.svg", get(|| asset(ICON_SVG, SVG)))
        .route("/favicon.ico", get(|| asset(ICON_SVG, SVG)))
        .route("/v1/web/approvals/{id}/summary", get(summary))
        .route("/v1/web/login/challenge", post(login_challenge))
        .route("/v1/web/login", post(login))
        .route("/v1/web/logout", post(logout))
        .route("/v1/web/approvals/{id}", get(review))
        .route("/v1/web/approvals/{id}/challenge", post(challenge))
        .route("/v1/web/approvals/{id}/decision", post(decide))
        .route("/v1/web/inbox", get(inbox))
        .route("/v1/web/standing-grants/{id}/revoke", post(revoke_standing))
        .merge(super::enroll::router())
        .layer(axum::middleware::from_fn(harden))
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

async fn page(html: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Security headers on every page and web API response.
async fn harden(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
        (
            "permissions-policy",
            "publickey-credentials-get=(self), publickey-credentials-create=(self)",
        ),
    ] {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    resp
}

/// The `Origin` of a state-changing request must be one of the configured origins: a cross-site
/// form or script cannot forge it, and a request without one is refused rather than trusted.
pub(super) fn check_origin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ApiError::forbidden(ErrorCode::OriginRequired, "an Origin header is required")
        })?;
    let allowed = state
        .config()
        .origins
        .iter()
        .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin));
    if !allowed {
        return Err(ApiError::forbidden(
            ErrorCode::OriginRefused,
            format!("origin {origin} is not an approver page origin"),
        ));
    }
    Ok(())
}

/// The client address, when the server was started with connect info.
pub(super) fn client_ip(parts: &Parts) -> Option<IpAddr> {
    parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// One sign-in attempt (a login challenge or a login assertion, from the page or the bearer
/// API): counted against the client's budget, one budget for both surfaces.
pub(crate) struct SignInAttempt;

impl FromRequestParts<AppState> for SignInAttempt {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        state
            .web_guard()
            .allow(client_ip(parts), state.now_ms())
            .map_err(|seconds| {
                ApiError::too_many(
                    ErrorCode::RateLimited,
                    "too many sign-in attempts; wait a minute and try again",
                    seconds,
                )
            })?;
        Ok(Self)
    }
}

/// A login attempt from the page: origin checked, then counted like every sign-in attempt.
pub(super) struct Attempt;

impl FromRequestParts<AppState> for Attempt {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        check_origin(state, &parts.headers)?;
        SignInAttempt::from_request_parts(parts, state).await?;
        Ok(Self)
    }
}

fn csrf_token(session_token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"countersign.csrf/1\n");
    h.update(session_token.as_bytes());
    b64::encode(&h.finalize())
}

fn session_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value)
}

/// A signed-in approver: a live session cookie; for anything but GET also the CSRF token and
/// an allowed Origin.
struct WebApprover {
    session: Session,
    csrf: String,
}

impl FromRequestParts<AppState> for WebApprover {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = session_token(&parts.headers)
            .ok_or_else(|| ApiError::unauthorized("sign in first"))?
            .to_owned();
        let csrf = csrf_token(&token);
        if parts.method != Method::GET {
            check_origin(state, &parts.headers)?;
            let sent = parts
                .headers
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            // Both sides are SHA-256 outputs of public length; a timing difference reveals
            // nothing an attacker without the cookie could use.
            if sent != csrf {
                return Err(ApiError::forbidden(
                    ErrorCode::Csrf,
                    "missing or wrong CSRF token; reload the page",
                ));
            }
        }
        let session = state.authenticate(&token).await?;
        Ok(Self { session, csrf })
    }
}

/// What anyone holding the link may see: a reference, the severity and the expiry (with the
/// time left by the service's clock, as every notification says it).
#[derive(Debug, Serialize)]
struct Summary {
    approval_id: String,
    severity: String,
    expires_at: String,
    time_left: String,
}

async fn summary(
    State(state): State<AppState>,
    PathArg(id): PathArg<String>,
) -> Result<Json<Summary>, ApiError> {
    let r = state.load(&id).await?;
    Ok(Json(Summary {
        approval_id: r.id,
        severity: r.severity,
        expires_at: crate::clock::rfc3339(crate::clock::from_ms(r.expires_at)),
        time_left: crate::notify::time_left(r.expires_at.saturating_sub(state.now_ms())),
    }))
}

/// A challenge for `navigator.credentials.get()`, with the WebAuthn `hints` for the browser
/// that asked (the page passes them on; see [`crate::hints`]).
#[derive(Debug, Serialize)]
struct WithHints<T> {
    #[serde(flatten)]
    challenge: T,
    hints: Vec<Hint>,
}

/// The hints for the browser that sent `headers`: the configured list, else by device.
pub(super) fn hints(state: &AppState, headers: &HeaderMap) -> Vec<Hint> {
    let value = |name: HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    crate::hints::for_request(
        state.config().webauthn_hints.as_deref(),
        value(HeaderName::from_static("sec-ch-ua-mobile")),
        value(header::USER_AGENT),
    )
}

async fn login_challenge(
    State(state): State<AppState>,
    _: Attempt,
    headers: HeaderMap,
) -> Result<Json<WithHints<crate::service::LoginChallenge>>, ApiError> {
    let challenge = state.login_challenge().await?;
    let hints = hints(&state, &headers);
    Ok(Json(WithHints { challenge, hints }))
}

#[derive(Debug, Serialize)]
struct WebLogin {
    principal: String,
    expires_at: String,
    csrf_token: String,
}

async fn login(
    State(state): State<AppState>,
    _: Attempt,
    Body(body): Body<AssertionBody>,
) -> Result<Response, ApiError> {
    let session = state.login(body).await?;
    let max_age = state.config().timeouts.session_seconds;
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age={max_age}",
        session.token
    );
    let body = WebLogin {
        principal: session.principal,
        expires_at: session.expires_at,
        csrf_token: csrf_token(&session.token),
    };
    let mut resp = Json(body).into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(ApiError::internal)?,
    );
    Ok(resp)
}

/// Sign out: the session is deleted on the server (the cookie alone would survive in a copy),
/// then the browser is told to drop the cookie.
async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    check_origin(&state, &headers)?;
    if let Some(token) = session_token(&headers) {
        state.logout(token).await?;
    }
    let mut resp = StatusCode::NO_CONTENT.into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&format!(
            "{SESSION_COOKIE}=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0"
        ))
        .map_err(ApiError::internal)?,
    );
    Ok(resp)
}

/// Step 2: the action, with the display model the page renders.
#[derive(Debug, Serialize)]
struct WebReview {
    principal: String,
    csrf_token: String,
    #[serde(flatten)]
    review: ReviewView,
    display: Display,
    /// The settled result, when the approval is no longer pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<ApprovalResult>,
    /// For a proposed standing grant: its uses, whether it is live, who signed and revoked it.
    #[serde(skip_serializing_if = "Option::is_none")]
    standing: Option<crate::service::StandingView>,
}

async fn review(
    State(state): State<AppState>,
    who: WebApprover,
    PathArg(id): PathArg<String>,
) -> Result<Json<WebReview>, ApiError> {
    let review = state.review(&id, &who.session).await?;
    let profile = state
        .profiles()
        .get(&review.profile)
        .ok_or_else(|| ApiError::internal("stored approval names an unpinned profile"))?;
    // Under `nfc = "normalize"`, a request whose strings NFC changed is shown as submitted
    // (what the gateway will execute), each changed code point marked.
    let display = display(
        profile,
        review.submitted_fields.as_ref().unwrap_or(&review.fields),
        Sentence {
            agent_id: &review.agent_id,
            tool_name: &review.tool_name,
        },
        &review.nfc_marks,
    );
    let result = if review.status == ApprovalStatus::Pending {
        None
    } else {
        let record = state.load(&id).await?;
        Some(state.result_of(&record))
    };
    let standing = if review.profile == countersign::STANDING_GRANT_PROFILE {
        state.standing_grant(&id).await?
    } else {
        None
    };
    Ok(Json(WebReview {
        principal: who.session.principal,
        csrf_token: who.csrf,
        review,
        display,
        result,
        standing,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChallengeRequest {
    decision: Decision,
}

async fn challenge(
    State(state): State<AppState>,
    who: WebApprover,
    PathArg(id): PathArg<String>,
    headers: HeaderMap,
    Body(req): Body<ChallengeRequest>,
) -> Result<Json<WithHints<DecisionChallenge>>, ApiError> {
    let challenge = state
        .decision_challenge(&id, req.decision, &who.session)
        .await?;
    let hints = hints(&state, &headers);
    Ok(Json(WithHints { challenge, hints }))
}

async fn decide(
    State(state): State<AppState>,
    who: WebApprover,
    PathArg(id): PathArg<String>,
    Body(body): Body<AssertionBody>,
) -> Result<Json<ApprovalResult>, ApiError> {
    let result = state.decide(&id, body, &who.session).await?;
    super::trace::log_result("decision recorded", &result);
    Ok(Json(result))
}

/// The inbox: what the signed-in approver may decide, and their own live standing grants.
#[derive(Debug, Serialize)]
struct WebInbox {
    csrf_token: String,
    #[serde(flatten)]
    inbox: crate::service::Inbox,
}

async fn inbox(
    State(state): State<AppState>,
    who: WebApprover,
) -> Result<Json<WebInbox>, ApiError> {
    let inbox = state.inbox(&who.session).await?;
    Ok(Json(WebInbox {
        csrf_token: who.csrf,
        inbox,
    }))
}

async fn revoke_standing(
    State(state): State<AppState>,
    who: WebApprover,
    PathArg(id): PathArg<String>,
) -> Result<Json<crate::service::StandingView>, ApiError> {
    state.revoke_standing(&id, &who.session).await.map(Json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_token_is_bound_to_the_session_token() {
        assert_eq!(csrf_token("a"), csrf_token("a"));
        assert_ne!(csrf_token("a"), csrf_token("b"));
        assert_ne!(csrf_token("a"), "a");
    }

    #[test]
    fn session_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("x=1; __Host-countersign-session=tok; y=2"),
        );
        assert_eq!(session_token(&h), Some("tok"));
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("countersign-session=tok"),
        );
        assert_eq!(session_token(&h), None);
    }

    #[test]
    fn pages_have_no_inline_script() {
        for html in [APPROVE_HTML, ENROLL_HTML] {
            let lower = html.to_ascii_lowercase();
            for (i, _) in lower.match_indices("<script") {
                let tag_end = lower[i..].find('>').map(|e| i + e).unwrap();
                assert!(lower[i..tag_end].contains(" src="), "inline script in page");
            }
            // No inline event handler attributes (` onclick=` and the like).
            let handler = lower.match_indices(" on").any(|(i, _)| {
                let rest = &lower[i + 3..];
                let name_len = rest.bytes().take_while(u8::is_ascii_lowercase).count();
                name_len > 0 && rest[name_len..].trim_start().starts_with('=')
            });
            assert!(!handler, "no inline event handlers");
            assert!(!lower.contains("style="), "no inline styles");
        }
    }
}
