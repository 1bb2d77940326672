//! Software authenticator (stub, owned by the softkey helper).
