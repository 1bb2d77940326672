// The approver page: sign in (step 1), check every field (step 2), approve or refuse (step 3).
// Without an id (`/approve`) it is the inbox: after sign-in, what the approver may decide and
// their own standing grants.
'use strict';

(() => {
  const parts = location.pathname.split('/').filter(Boolean);
  const inboxMode = parts.length < 2;
  const id = inboxMode ? '' : decodeURIComponent(parts[parts.length - 1]);
  const STANDING_PROFILE = 'countersign.standing-grant/2';
  let csrf = null;
  let credentialId = null; // the credential that signed in; decisions must use the same one
  let rpId = null;
  let busy = false;

  // Render display segments: plain runs as text, marked characters as a badge. Both the marked
  // character and its code-point name are bidi-isolated (<bdi>, and unicode-bidi: isolate in the
  // CSS), so a right-to-left override can neither reverse its own badge nor the text after it:
  // what follows is shown in the order it is signed.
  function segmentsInto(parent, segments) {
    for (const seg of segments) {
      if (!seg.mark) {
        parent.appendChild(document.createTextNode(seg.text));
        continue;
      }
      if (seg.mark.kind === 'line' || seg.mark.kind === 'tab') {
        // A text's own line structure: a quiet marker where a line ends or a tab stands, then the
        // character itself (the value cell keeps line breaks); in the JSON view, the escape.
        const raw = /[\n\t]/.test(seg.text);
        const q = cs.el('span', 'quiet ' + seg.mark.kind, raw ? (seg.mark.kind === 'line' ? '\u21b5' : '\u2192') : seg.text);
        q.title = seg.mark.name;
        parent.appendChild(q);
        if (raw) parent.appendChild(document.createTextNode(seg.text));
        continue;
      }
      const m = cs.el('mark', 'deceptive ' + seg.mark.kind);
      m.title = seg.mark.name;
      const ch = cs.el('bdi', 'ch', seg.text);
      ch.dir = 'ltr';
      const cp = cs.el('bdi', 'cp', seg.mark.name);
      cp.dir = 'ltr';
      m.appendChild(ch);
      m.appendChild(cp);
      parent.appendChild(m);
    }
  }

  const STATUS_TEXT = {
    expired_unanswered: 'This request expired before anyone answered it. Nothing can be decided any more.',
    cancelled: 'The agent withdrew this request. Nothing can be decided any more.',
    approver_refused: 'This request was refused.',
  };

  function showOutcome(result, note) {
    cs.show('step3', false);
    cs.show('outcome', true);
    const status = result.status;
    let text;
    if (status === 'APPROVED') text = 'APPROVED';
    else if (status === 'DENIED') text = 'REFUSED / DENIED';
    else text = status;
    const reason = result.reason_code;
    if (reason && STATUS_TEXT[reason] && reason !== 'approver_refused') text = STATUS_TEXT[reason];
    const p = document.getElementById('outcome-text');
    p.textContent = (note ? note + ' ' : '') + text;
    p.className = 'outcome ' + (status === 'APPROVED' ? 'approved' : 'denied');
    const dl = document.getElementById('outcome-details');
    dl.textContent = '';
    const rows = [['Request', result.approval_id], ['Status', status]];
    if (reason) rows.push(['Reason', reason]);
    const ev = (result.approver_evidence || [])[0];
    if (ev && typeof ev === 'object') {
      rows.push(['Signed decision', ev.decision]);
      rows.push(['Signed at', ev.assertion_at]);
      rows.push(['op_hash', ev.op_hash]);
      rows.push(['Evidence', 'WebAuthn signature verified by the service with the Countersign verifier; anyone can re-check it offline against the published registry.']);
    }
    for (const [k, v] of rows) {
      dl.appendChild(cs.el('dt', '', k));
      dl.appendChild(cs.el('dd', 'mono', String(v)));
    }
  }

  function render(view) {
    csrf = view.csrf_token;
    cs.show('step1', false);
    cs.show('step2', true);
    const who = document.getElementById('who');
    who.textContent = 'Signed in as ' + view.principal + '. Request from agent ';
    const agent = cs.el('bdi', 'name');
    segmentsInto(agent, view.display.agent_id);
    who.appendChild(agent);
    who.appendChild(document.createTextNode(' for tool '));
    const tool = cs.el('bdi', 'name');
    segmentsInto(tool, view.display.tool_name);
    who.appendChild(tool);
    who.appendChild(document.createTextNode(' (profile ' + view.profile + ').'));
    cs.setText('title', view.display.title);
    cs.show('banner', view.display.marked);
    cs.show('nfc-banner', view.display.nfc_changed);
    const tbody = document.querySelector('#fields tbody');
    tbody.textContent = '';
    for (const row of view.display.rows) {
      const tr = cs.el('tr');
      tr.dataset.path = row.path;
      const th = cs.el('th');
      th.scope = 'row';
      segmentsInto(th, row.label);
      const td = cs.el('td', 'value');
      if (row.kind !== 'string') td.appendChild(cs.el('span', 'kind', row.kind));
      const v = cs.el('span', 'v');
      segmentsInto(v, row.value);
      td.appendChild(v);
      if (row.grouped) {
        // A reading aid beside the exact value, never instead of it.
        const g = cs.el('div', 'grouped');
        g.appendChild(cs.el('span', 'aid', 'digits grouped: '));
        g.appendChild(cs.el('span', 'num', row.grouped));
        td.appendChild(g);
      }
      for (const w of row.warnings) td.appendChild(cs.el('div', 'rowwarn', '⚠ ' + w));
      tr.appendChild(th);
      tr.appendChild(td);
      tbody.appendChild(tr);
    }
    // Built from the server's segments, not JSON.stringify: the same marks as the table.
    const raw = document.getElementById('raw');
    raw.textContent = '';
    segmentsInto(raw, view.display.json);
    const standing = view.profile === STANDING_PROFILE;
    cs.show('standing-banner', standing);
    if (standing) {
      const n = view.fields.max_uses;
      cs.setText('standing-uses', 'at most ' + n + (n === 1 ? ' time' : ' times'));
      cs.setText('standing-until', cs.localTime(view.fields.expires_at));
      // Gateway names are plain ASCII (A-Z a-z 0-9 . _ -): nothing in them needs a mark. The
      // server id may hold any character, so the banner points at its marked row instead.
      const calls = view.fields.calls;
      cs.setText('standing-gateways', calls.gateways.join(', '));
      cs.show('standing-server', 'server_id' in calls);
      document.getElementById('approve').textContent = 'Approve this standing grant';
    }
    renderStanding(view);
    if (view.status === 'PENDING') {
      cs.show('step3', true);
    } else {
      showOutcome(view.result || { status: view.status, approval_id: view.approval_id },
        'Already decided:');
    }
  }

  // The grant's life after signing: uses, whether it is in force, and revocation by its signer.
  function renderStanding(view) {
    const g = view.standing;
    cs.show('standing', !!g);
    if (!g) return;
    const dl = document.getElementById('standing-details');
    dl.textContent = '';
    const rows = [['Uses', g.uses + ' of ' + g.max_uses], ['In force', g.live ? 'yes' : 'no'],
      ['Expires', cs.localTime(g.expires_at)]];
    if (g.signed_by) rows.push(['Signed by', g.signed_by]);
    if (g.revoked_at) rows.push(['Revoked', g.revoked_at + ' by ' + g.revoked_by]);
    for (const [k, v] of rows) {
      dl.appendChild(cs.el('dt', '', k));
      dl.appendChild(cs.el('dd', 'mono', String(v)));
    }
    const mine = g.status === 'APPROVED' && g.signed_by === view.principal && !g.revoked_at;
    cs.show('revoke', mine);
  }

  async function revoke() {
    if (busy) return;
    busy = true;
    cs.error('');
    try {
      const r = await cs.call('POST', '/v1/web/standing-grants/' + encodeURIComponent(id) + '/revoke', {}, csrf);
      if (r.status !== 200) { cs.error(cs.errorMessage(r, 'The grant was not revoked')); return; }
      await loadReview();
    } finally {
      busy = false;
    }
  }

  function link(approvalId) {
    const a = cs.el('a', 'mono', approvalId);
    a.href = '/approve/' + encodeURIComponent(approvalId);
    return a;
  }

  // Each cell of a list row names its column (data-label): on a narrow screen the rows are
  // shown as cards without the header row, and the stylesheet prints the name beside the value.
  function labelCells(tr) {
    const heads = tr.closest('table').querySelectorAll('thead th');
    tr.querySelectorAll('td').forEach((td, i) => {
      if (heads[i]) td.dataset.label = heads[i].textContent;
    });
  }

  function renderInbox(inbox) {
    csrf = inbox.csrf_token;
    cs.show('step1', false);
    cs.show('inbox', true);
    cs.setText('inbox-who', 'Signed in as ' + inbox.principal + '.');
    const pending = document.querySelector('#inbox-pending tbody');
    pending.textContent = '';
    for (const item of inbox.pending) {
      const tr = cs.el('tr');
      tr.dataset.id = item.approval_id;
      const ref = cs.el('td');
      ref.appendChild(link(item.approval_id));
      tr.appendChild(ref);
      tr.appendChild(cs.el('td', '', item.kind === 'standing_grant' ? 'standing grant' : 'call'));
      tr.appendChild(cs.el('td', 'mono', item.tool_name));
      tr.appendChild(cs.el('td', 'sev sev-' + item.severity, item.severity));
      tr.appendChild(cs.el('td', '', cs.localTime(item.expires_at)));
      pending.appendChild(tr);
      labelCells(tr);
    }
    cs.show('inbox-empty', inbox.pending.length === 0);
    const grants = document.querySelector('#inbox-grants tbody');
    grants.textContent = '';
    for (const g of inbox.standing_grants) {
      const tr = cs.el('tr');
      tr.dataset.id = g.grant_id;
      const ref = cs.el('td');
      ref.appendChild(link(g.grant_id));
      tr.appendChild(ref);
      tr.appendChild(cs.el('td', 'mono', g.agent_id));
      tr.appendChild(cs.el('td', 'mono', g.tool_name));
      tr.appendChild(cs.el('td', '', g.uses + ' of ' + g.max_uses));
      tr.appendChild(cs.el('td', '', cs.localTime(g.expires_at)));
      grants.appendChild(tr);
      labelCells(tr);
    }
    cs.show('grants-empty', inbox.standing_grants.length === 0);
  }

  async function loadInbox() {
    const r = await cs.call('GET', '/v1/web/inbox');
    if (r.status === 200) {
      renderInbox(r.body);
      return true;
    }
    if (r.status === 401) {
      cs.show('step1', true);
      return false;
    }
    cs.error(cs.errorMessage(r, 'Could not load your inbox'));
    return false;
  }

  async function loadReview() {
    const r = await cs.call('GET', '/v1/web/approvals/' + encodeURIComponent(id));
    if (r.status === 200) {
      render(r.body);
      return true;
    }
    if (r.status === 401) {
      cs.show('step1', true);
      return false;
    }
    cs.error(cs.errorMessage(r, 'Could not load the request'));
    return false;
  }

  async function signIn() {
    if (busy) return;
    busy = true;
    cs.error('');
    try {
      const c = await cs.call('POST', '/v1/web/login/challenge', {});
      if (c.status !== 200) { cs.error(cs.errorMessage(c, 'Sign-in is not possible now')); return; }
      rpId = c.body.rp_id;
      let cred;
      try {
        cred = await navigator.credentials.get({
          publicKey: {
            challenge: cs.b64urlDecode(c.body.challenge),
            rpId,
            allowCredentials: [],
            userVerification: 'required',
            hints: c.body.hints || [],
            timeout: 120000,
          },
        });
      } catch (e) {
        cs.error('Your security key did not sign in: ' + e.message);
        return;
      }
      const r = await cs.call('POST', '/v1/web/login', cs.assertionBody(cred));
      if (r.status !== 200) { cs.error(cs.errorMessage(r, 'Sign-in failed')); return; }
      credentialId = cred.rawId;
      csrf = r.body.csrf_token;
      await (inboxMode ? loadInbox() : loadReview());
    } finally {
      busy = false;
    }
  }

  async function decide(decision) {
    if (busy) return;
    busy = true;
    cs.error('');
    try {
      const path = '/v1/web/approvals/' + encodeURIComponent(id);
      const c = await cs.call('POST', path + '/challenge', { decision }, csrf);
      if (c.status === 409 && c.body && c.body.error && c.body.error.result) {
        showOutcome(c.body.error.result, 'Already decided:');
        return;
      }
      if (c.status !== 200) { cs.error(cs.errorMessage(c, 'Could not prepare the signature')); return; }
      const publicKey = {
        challenge: cs.b64urlDecode(c.body.challenge),
        rpId: c.body.rp_id,
        userVerification: 'required',
        hints: c.body.hints || [],
        timeout: 120000,
      };
      if (credentialId) publicKey.allowCredentials = [{ type: 'public-key', id: credentialId }];
      let cred;
      try {
        cred = await navigator.credentials.get({ publicKey });
      } catch (e) {
        cs.error('Your security key did not sign: ' + e.message);
        return;
      }
      const r = await cs.call('POST', path + '/decision', cs.assertionBody(cred), csrf);
      if (r.status === 200) {
        showOutcome(r.body, 'Recorded and verified:');
      } else if (r.status === 409 && r.body && r.body.error && r.body.error.result) {
        showOutcome(r.body.error.result, r.body.error.code === 'expired' ? 'Too late:' : 'Already decided:');
      } else {
        cs.error(cs.errorMessage(r, 'The decision was not accepted'));
      }
    } finally {
      busy = false;
    }
  }

  async function start() {
    if (inboxMode) {
      await loadInbox();
      return;
    }
    cs.show('summary', true);
    cs.setText('ref', id);
    const s = await cs.call('GET', '/v1/web/approvals/' + encodeURIComponent(id) + '/summary');
    if (s.status !== 200) {
      cs.error(s.status === 404 ? 'There is no approval request with this reference.'
        : cs.errorMessage(s, 'Could not load the request'));
      return;
    }
    cs.setText('severity', s.body.severity);
    document.getElementById('severity').className = 'sev sev-' + s.body.severity;
    cs.setText('expires', cs.localTime(s.body.expires_at) + ' (' + s.body.time_left + ' left)');
    await loadReview();
  }

  document.getElementById('signin').addEventListener('click', signIn);
  document.getElementById('approve').addEventListener('click', () => decide('APPROVED'));
  document.getElementById('refuse').addEventListener('click', () => decide('DENIED'));
  document.getElementById('revoke').addEventListener('click', revoke);
  start().catch((e) => cs.error('Unexpected error: ' + e.message));
})();
