//! [`Store`] and [`StandingStore`] on [`SqlStore`]: each method copies its arguments (on
//! PostgreSQL the rule runs on a connection's worker thread, and may run again after a
//! serialization failure) and runs its rule from the parent module as one transaction, or a
//! lone statement when it issues just one.

use super::sql::*;
use super::*;

impl Store for SqlStore {
    fn create(&self, a: &NewApproval, events: &[AuditEvent]) -> Result<(), StoreError> {
        let (a, events) = (a.clone(), events.to_vec());
        self.write(move |tx, sealer| {
            insert_approval(tx, &a, None, None)?;
            append(tx, sealer, &events)
        })
    }

    fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        let id = id.to_owned();
        self.one(move |tx| approval(tx, &id, false))
    }

    fn settle(&self, s: &Settlement) -> Result<SettleOutcome, StoreError> {
        let s = s.clone();
        self.write(move |tx, sealer| settle(tx, sealer, &s))
    }

    fn expire_overdue(&self, now: i64, max: usize) -> Result<Vec<String>, StoreError> {
        let max = limit(max);
        self.write(move |tx, sealer| expire_overdue(tx, sealer, now, max))
    }

    fn collect_grant(
        &self,
        id: &str,
        gateway: &str,
        fingerprint: &[u8; 32],
        tool_name: Option<&str>,
        now: i64,
        event: &AuditEvent,
    ) -> Result<GrantOutcome, StoreError> {
        let c = Collect {
            id: id.to_owned(),
            gateway: gateway.to_owned(),
            fingerprint: *fingerprint,
            tool_name: tool_name.map(str::to_owned),
            now,
            event: event.clone(),
        };
        self.write(move |tx, sealer| collect_grant(tx, sealer, &c))
    }

    fn put_challenge(&self, c: &IssuedChallenge) -> Result<(), StoreError> {
        let c = c.clone();
        self.one(move |tx| {
            tx.execute(
                &INSERT_CHALLENGE,
                params![
                    &c.nonce,
                    &c.approval_id,
                    c.decision.as_str(),
                    &c.principal,
                    c.expires_at
                ],
            )
            .map(drop)
        })
    }

    fn challenge(&self, nonce: &[u8]) -> Result<Option<IssuedChallenge>, StoreError> {
        let nonce = nonce.to_vec();
        self.one(move |tx| {
            let Some(mut r) = tx.query_opt(&CHALLENGE, params![&nonce])? else {
                return Ok(None);
            };
            Ok(Some(IssuedChallenge {
                nonce: nonce.clone(),
                approval_id: r.text(0)?,
                decision: decision_from(&r.text(1)?)?,
                principal: r.text(2)?,
                expires_at: r.int(3)?,
            }))
        })
    }

    fn replay_snapshot(
        &self,
        nonce: &[u8],
        credential_id: &[u8],
    ) -> Result<(bool, Option<u32>), StoreError> {
        let (nonce, credential_id) = (nonce.to_vec(), credential_id.to_vec());
        self.one(move |tx| {
            let Some(mut r) = tx.query_opt(&REPLAY_SNAPSHOT, params![&nonce, &credential_id])?
            else {
                return Ok((false, None));
            };
            let count = r
                .opt_int(1)?
                .map(|c| {
                    u32::try_from(c).map_err(|_| StoreError::Corrupt(format!("sign_count {c}")))
                })
                .transpose()?;
            Ok((r.bool(0)?, count))
        })
    }

    fn put_login_challenge(&self, nonce: &[u8], expires_at: i64) -> Result<(), StoreError> {
        let nonce = nonce.to_vec();
        self.one(move |tx| {
            tx.execute(&INSERT_LOGIN_CHALLENGE, params![&nonce, expires_at])
                .map(drop)
        })
    }

    fn take_login_challenge(&self, nonce: &[u8], now: i64) -> Result<bool, StoreError> {
        let nonce = nonce.to_vec();
        self.one(move |tx| {
            Ok(
                match tx.query_opt(&TAKE_LOGIN_CHALLENGE, params![&nonce])? {
                    Some(mut r) => r.int(0)? > now,
                    None => false,
                },
            )
        })
    }

    fn create_session(
        &self,
        token_hash: &[u8; 32],
        s: &Session,
        sign_count: u32,
    ) -> Result<bool, StoreError> {
        let (token_hash, s) = (*token_hash, s.clone());
        self.write(move |tx, _| create_session(tx, &token_hash, &s, sign_count))
    }

    fn session(&self, token_hash: &[u8; 32], now: i64) -> Result<Option<Session>, StoreError> {
        let token_hash = *token_hash;
        self.one(move |tx| {
            let Some(mut r) = tx.query_opt(&SESSION, params![&token_hash, now])? else {
                return Ok(None);
            };
            Ok(Some(Session {
                principal: r.text(0)?,
                credential_id: r.blob(1)?,
                expires_at: r.int(2)?,
            }))
        })
    }

    fn delete_session(&self, token_hash: &[u8; 32]) -> Result<bool, StoreError> {
        let token_hash = *token_hash;
        self.one(move |tx| Ok(tx.execute(&DELETE_SESSION, params![&token_hash])? > 0))
    }

    fn put_credentials(&self, records: &[CredentialRecord], now: i64) -> Result<usize, StoreError> {
        let mut records = records.to_vec();
        // One lock order for every importer: replicas starting together cannot deadlock.
        records.sort_by(|a, b| a.credential_id.cmp(&b.credential_id));
        self.write(move |tx, sealer| put_credentials(tx, sealer, &records, now))
    }

    fn revoke_credential(
        &self,
        credential_id: &[u8],
        _now: i64,
        event: &AuditEvent,
    ) -> Result<RevokeOutcome, StoreError> {
        let (credential_id, event) = (credential_id.to_vec(), event.clone());
        self.write(move |tx, sealer| revoke_credential(tx, sealer, &credential_id, &event))
    }

    fn database_now_ms(&self) -> Result<i64, StoreError> {
        self.one(|tx| {
            tx.query_opt(&DATABASE_NOW, params![])?
                .ok_or_else(|| StoreError::Database("the clock query returned no row".into()))?
                .int(0)
        })
    }

    fn credentials_version(&self) -> Result<u64, StoreError> {
        self.one(|tx| {
            tx.query_opt(&CREDENTIALS_VERSION, params![])?
                .ok_or_else(|| StoreError::Corrupt("credentials_version row missing".into()))?
                .u64(0, "credentials version")
        })
    }

    fn credentials(&self) -> Result<Vec<CredentialRecord>, StoreError> {
        self.one(|tx| {
            tx.query(&CREDENTIALS, params![])?
                .into_iter()
                .map(|mut r| parse_record(&r.text(0)?))
                .collect()
        })
    }

    fn put_gateway(&self, g: &GatewayRecord) -> Result<bool, StoreError> {
        let g = g.clone();
        self.write(move |tx, _| {
            put_token(
                tx,
                &GATEWAY_TABLE,
                &g.name,
                &g.token_hash,
                g.created_at,
                g.revoked_at,
            )
        })
    }

    fn revoke_gateway(&self, name: &str, now: i64) -> Result<RevokeOutcome, StoreError> {
        let name = name.to_owned();
        self.write(move |tx, _| revoke_token(tx, &GATEWAY_TABLE, &name, now))
    }

    fn gateways(&self) -> Result<Vec<GatewayRecord>, StoreError> {
        self.one(|tx| {
            Ok(tokens(tx, &GATEWAY_TABLE)?
                .into_iter()
                .map(|t| GatewayRecord {
                    name: t.name,
                    token_hash: t.token_hash,
                    created_at: t.created_at,
                    revoked_at: t.revoked_at,
                })
                .collect())
        })
    }

    fn put_auditor(&self, a: &AuditorRecord) -> Result<bool, StoreError> {
        let a = a.clone();
        self.write(move |tx, _| {
            put_token(
                tx,
                &AUDITOR_TABLE,
                &a.name,
                &a.token_hash,
                a.created_at,
                a.revoked_at,
            )
        })
    }

    fn revoke_auditor(&self, name: &str, now: i64) -> Result<RevokeOutcome, StoreError> {
        let name = name.to_owned();
        self.write(move |tx, _| revoke_token(tx, &AUDITOR_TABLE, &name, now))
    }

    fn auditors(&self) -> Result<Vec<AuditorRecord>, StoreError> {
        self.one(|tx| {
            Ok(tokens(tx, &AUDITOR_TABLE)?
                .into_iter()
                .map(|t| AuditorRecord {
                    name: t.name,
                    token_hash: t.token_hash,
                    created_at: t.created_at,
                    revoked_at: t.revoked_at,
                })
                .collect())
        })
    }

    fn put_invite(&self, i: &crate::store::Invite) -> Result<(), StoreError> {
        let i = i.clone();
        self.one(move |tx| {
            tx.execute(
                &INSERT_INVITE,
                params![
                    &i.token_hash,
                    &i.principal,
                    i.group.as_deref(),
                    i.created_at,
                    i.expires_at
                ],
            )
            .map(drop)
        })
    }

    fn invite(
        &self,
        token_hash: &[u8; 32],
        now: i64,
    ) -> Result<Option<crate::store::Invite>, StoreError> {
        let token_hash = *token_hash;
        self.one(move |tx| {
            let Some(mut r) = tx.query_opt(&INVITE, params![&token_hash, now])? else {
                return Ok(None);
            };
            Ok(Some(crate::store::Invite {
                token_hash,
                principal: r.text(0)?,
                group: r.opt_text(1)?,
                created_at: r.int(2)?,
                expires_at: r.int(3)?,
            }))
        })
    }

    fn redeem_invite(
        &self,
        token_hash: &[u8; 32],
        now: i64,
        credential: &CredentialRecord,
        event: &AuditEvent,
    ) -> Result<RedeemOutcome, StoreError> {
        let (token_hash, credential, event) = (*token_hash, credential.clone(), event.clone());
        self.write(move |tx, sealer| {
            redeem_invite(tx, sealer, &token_hash, now, &credential, &event)
        })
    }

    fn memberships(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.one(|tx| {
            tx.query(&MEMBERSHIPS, params![])?
                .into_iter()
                .map(|mut r| Ok((r.text(0)?, r.text(1)?)))
                .collect()
        })
    }

    fn audit_head(&self) -> Result<(u64, [u8; 32]), StoreError> {
        self.seal_audit()?;
        self.one(|tx| head(tx, false))
    }

    fn seals_on_commit(&self) -> bool {
        matches!(self.db, Db::Sqlite(_))
    }

    fn seal_audit(&self) -> Result<(), StoreError> {
        match &self.db {
            Db::Sqlite(_) => Ok(()),
            Db::Postgres(db) => db.seal_now(),
        }
    }

    fn audit_lines_after(&self, seq: u64, max: usize) -> Result<Vec<(u64, String)>, StoreError> {
        let (seq, max) = (to_i64(seq), limit(max));
        self.one(move |tx| {
            tx.query(&AUDIT_AFTER, params![seq, max])?
                .into_iter()
                .map(|mut r| Ok((r.u64(0, "audit seq")?, r.text(1)?)))
                .collect()
        })
    }

    fn pending_count(&self) -> Result<u64, StoreError> {
        self.one(|tx| match tx.query_opt(&PENDING_COUNT, params![])? {
            Some(mut r) => Ok(u64::try_from(r.int(0)?).unwrap_or(0)),
            None => Ok(0),
        })
    }

    fn oldest_pending(&self) -> Result<Option<i64>, StoreError> {
        self.one(|tx| match tx.query_opt(&OLDEST_PENDING, params![])? {
            Some(mut r) => r.opt_int(0),
            None => Ok(None),
        })
    }

    fn reconcile_preauthorizations(
        &self,
        incoming: &[PreauthDefinition],
        now: i64,
    ) -> Result<Vec<PreauthChange>, StoreError> {
        let incoming = incoming.to_vec();
        self.write(move |tx, sealer| reconcile_preauthorizations(tx, sealer, &incoming, now))
    }

    fn preauthorizations(&self) -> Result<Vec<StoredPreauth>, StoreError> {
        self.one(stored_preauths)
    }

    fn disable_preauthorization(&self, slug: &str, now: i64) -> Result<DisableOutcome, StoreError> {
        let slug = slug.to_owned();
        self.write(move |tx, sealer| disable_preauthorization(tx, sealer, &slug, now))
    }

    fn create_preauthorized(
        &self,
        a: &NewApproval,
        slug: &str,
        digest: &[u8; 32],
        events: &[AuditEvent],
    ) -> Result<Option<i64>, StoreError> {
        let (a, slug, digest, events) = (a.clone(), slug.to_owned(), *digest, events.to_vec());
        self.write(move |tx, sealer| create_preauthorized(tx, sealer, &a, &slug, &digest, &events))
    }

    fn ready(&self) -> Result<(), StoreError> {
        match &self.db {
            Db::Sqlite(db) => db.ready(),
            Db::Postgres(db) => db.ready(),
        }
    }
}

impl StandingStore for SqlStore {
    fn create_standing_proposal(
        &self,
        approval: &NewApproval,
        grant: &NewStandingGrant,
        events: &[AuditEvent],
    ) -> Result<(), StoreError> {
        let (approval, grant, events) = (approval.clone(), grant.clone(), events.to_vec());
        self.write(move |tx, sealer| {
            insert_approval(tx, &approval, None, None)?;
            tx.execute(
                &INSERT_STANDING,
                params![&grant.id, grant.expires_at, grant.max_uses],
            )?;
            for gateway in &grant.gateways {
                tx.execute(&INSERT_STANDING_GATEWAY, params![&grant.id, gateway])?;
            }
            append(tx, sealer, &events)
        })
    }

    fn standing_grant(&self, id: &str) -> Result<Option<StandingGrantRecord>, StoreError> {
        let id = id.to_owned();
        self.one(move |tx| {
            tx.query_opt(&STANDING_GRANT, params![&id])?
                .map(read_grant)
                .transpose()
        })
    }

    fn live_standing_grants(
        &self,
        now: i64,
        max: usize,
    ) -> Result<Vec<StandingGrantRecord>, StoreError> {
        let max = limit(max);
        self.one(move |tx| {
            tx.query(&LIVE_STANDING_GRANTS, params![now, max])?
                .into_iter()
                .map(read_grant)
                .collect()
        })
    }

    fn live_standing_grants_of(
        &self,
        gateway: &str,
        now: i64,
        max: usize,
    ) -> Result<Vec<StandingGrantRecord>, StoreError> {
        let (gateway, max) = (gateway.to_owned(), limit(max));
        self.one(move |tx| {
            tx.query(&LIVE_STANDING_GRANTS_OF, params![now, max, &gateway])?
                .into_iter()
                .map(read_grant)
                .collect()
        })
    }

    fn use_standing_grant(
        &self,
        approval: &NewApproval,
        grant_id: &str,
        now: i64,
        records: UseRecords,
    ) -> Result<Option<u32>, StoreError> {
        let (approval, grant_id) = (approval.clone(), grant_id.to_owned());
        self.write(move |tx, sealer| {
            use_standing_grant(tx, sealer, &approval, &grant_id, now, &records)
        })
    }

    fn revoke_standing_grant(
        &self,
        id: &str,
        principal: &str,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError> {
        let (id, principal, event) = (id.to_owned(), principal.to_owned(), event.clone());
        self.write(move |tx, sealer| {
            let revoked = tx.execute(&REVOKE_STANDING, params![&id, now, &principal])? == 1;
            if revoked {
                append(tx, sealer, std::slice::from_ref(&event))?;
            }
            Ok(revoked)
        })
    }

    fn open_approvals(&self, now: i64, max: usize) -> Result<Vec<ApprovalRecord>, StoreError> {
        let max = limit(max);
        self.one(move |tx| read_approvals(tx.query(&OPEN_APPROVALS, params![now, max])?))
    }
}
