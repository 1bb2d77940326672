// Shared helpers of the approver and enrollment pages: base64url, JSON calls, messages.
'use strict';

const cs = (() => {
  function b64urlEncode(buffer) {
    const bytes = new Uint8Array(buffer);
    let bin = '';
    for (const b of bytes) bin += String.fromCharCode(b);
    return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  function b64urlDecode(text) {
    const pad = '='.repeat((4 - (text.length % 4)) % 4);
    const bin = atob(text.replace(/-/g, '+').replace(/_/g, '/') + pad);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out.buffer;
  }

  // A JSON call. Resolves to {status, body}; never throws for HTTP errors.
  async function call(method, path, body, csrf) {
    const headers = { 'Accept': 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (csrf) headers['X-Countersign-CSRF'] = csrf;
    const resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
      redirect: 'error',
    });
    let json = null;
    try { json = await resp.json(); } catch (_) { json = null; }
    return { status: resp.status, body: json };
  }

  function el(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function show(id, visible) {
    document.getElementById(id).hidden = !visible;
  }

  function setText(id, text) {
    document.getElementById(id).textContent = text;
  }

  function error(message) {
    const e = document.getElementById('error');
    e.textContent = message;
    e.hidden = !message;
  }

  function errorMessage(reply, fallback) {
    const err = reply.body && reply.body.error;
    if (!err) return fallback + ' (HTTP ' + reply.status + ')';
    return err.message + (err.reason_code ? ' [' + err.reason_code + ']' : '');
  }

  function localTime(rfc3339) {
    const d = new Date(rfc3339);
    if (isNaN(d.getTime())) return rfc3339;
    return d.toLocaleString() + ' (' + rfc3339 + ')';
  }

  // The assertion body the service takes, from a PublicKeyCredential of credentials.get().
  function assertionBody(cred) {
    return {
      credential_id: b64urlEncode(cred.rawId),
      client_data_json: b64urlEncode(cred.response.clientDataJSON),
      authenticator_data: b64urlEncode(cred.response.authenticatorData),
      signature: b64urlEncode(cred.response.signature),
    };
  }

  return { b64urlEncode, b64urlDecode, call, el, show, setText, error, errorMessage, localTime, assertionBody };
})();
