// The enrollment page: redeem a one-time invite by registering a security key.
'use strict';

(() => {
  // The token travels in the fragment, which is never sent to a server; take it out of the
  // address bar so it is not left in history or shown on screen.
  const token = location.hash.replace(/^#/, '');
  if (location.hash) history.replaceState(null, '', location.pathname);
  let options = null;
  let busy = false;

  function creationOptions(o) {
    const pk = Object.assign({}, o.publicKey);
    pk.challenge = cs.b64urlDecode(pk.challenge);
    pk.user = Object.assign({}, pk.user, { id: cs.b64urlDecode(pk.user.id) });
    if (pk.excludeCredentials) {
      pk.excludeCredentials = pk.excludeCredentials.map((c) =>
        Object.assign({}, c, { id: cs.b64urlDecode(c.id) }));
    }
    return { publicKey: pk };
  }

  async function begin() {
    if (!token) { cs.error('This page needs the invite link your operator gave you.'); return; }
    const r = await cs.call('POST', '/v1/enroll/start', { invite: token });
    if (r.status !== 200) { cs.error(cs.errorMessage(r, 'The invite cannot be used')); return; }
    options = r.body.options;
    cs.setText('principal', r.body.principal);
    cs.setText('group', r.body.group || '(none)');
    cs.setText('invite-expires', cs.localTime(r.body.invite_expires_at));
    cs.setText('policy', r.body.attestation_policy === 'verified'
      ? 'verified: only approved authenticator models are accepted'
      : 'none: any authenticator is accepted (assurance up to AAL2)');
    cs.show('invite', true);
  }

  async function register() {
    if (busy) return;
    busy = true;
    cs.error('');
    try {
      let cred;
      try {
        cred = await navigator.credentials.create(creationOptions(options));
      } catch (e) {
        cs.error('Your security key did not register: ' + e.message + '. Reload the page to try again.');
        return;
      }
      const response = {
        attestationObject: cs.b64urlEncode(cred.response.attestationObject),
        clientDataJSON: cs.b64urlEncode(cred.response.clientDataJSON),
      };
      if (cred.response.getTransports) response.transports = cred.response.getTransports();
      const body = {
        invite: token,
        credential: {
          id: cred.id,
          rawId: cs.b64urlEncode(cred.rawId),
          type: cred.type,
          response,
          extensions: {},
        },
      };
      const r = await cs.call('POST', '/v1/enroll/finish', body);
      if (r.status !== 200) { cs.error(cs.errorMessage(r, 'Enrollment failed')); return; }
      cs.show('invite', false);
      cs.show('done', true);
      cs.setText('done-text', 'Your security key is enrolled for ' + r.body.principal + '.');
      const dl = document.getElementById('done-details');
      const rows = [
        ['Credential', r.body.credential_id],
        ['Authenticator model (AAGUID)', r.body.aaguid || 'unknown'],
        ['Attestation', r.body.attestation_format + (r.body.chain_verified ? ', chain verified' : ', chain not verified')],
        ['Synced / backup eligible', String(r.body.backup_eligible)],
        ['Strongest assurance', r.body.assurance_ceiling],
      ];
      for (const [k, v] of rows) {
        dl.appendChild(cs.el('dt', '', k));
        dl.appendChild(cs.el('dd', 'mono', v));
      }
    } finally {
      busy = false;
    }
  }

  // Opening another invite link in this tab only changes the fragment: start over with it.
  window.addEventListener('hashchange', () => location.reload());
  document.getElementById('register').addEventListener('click', register);
  begin().catch((e) => cs.error('Unexpected error: ' + e.message));
})();
