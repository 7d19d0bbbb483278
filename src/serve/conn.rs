//! One SSH connection: public-key authentication, and its channels' requests.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use russh::keys::ssh_key::PublicKey;
use russh::server::{Auth, Handle, Msg, PublicKeyOffer, Session, VerifiedPublicKey};
use russh::{Channel, ChannelId};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::console::Input;
use crate::domain::{Identity, Role};
use crate::listener::Pass;
use crate::serve::identity::fingerprint;
use crate::serve::keys;
use crate::serve::screen::{Screen, console, exec, finish, size, too_many};
use crate::serve::sessions::SessionGuard;
use crate::serve::shared::Shared;

/// One connection: who logged in, and its channels.
pub struct Conn {
    pub(super) shared: Arc<Shared>,
    pub(super) peer: Option<SocketAddr>,
    pub(super) who: Option<Identity>,
    pub(super) channels: HashMap<ChannelId, ChannelState>,
    /// Its place among the connections not yet logged in, given up when it logs in.
    startup: Option<Pass>,
    /// Set when it logs in: its login grace no longer runs.
    logged_in: Arc<AtomicBool>,
}

#[derive(Default)]
pub(super) struct ChannelState {
    pub(super) size: Option<(u16, u16)>,
    pub(super) no_color: bool,
    pub(super) decoder: keys::Decoder,
    pub(super) input: Option<UnboundedSender<Input>>,
    pub(super) started: bool,
}

impl Conn {
    pub(super) fn new(
        shared: Arc<Shared>,
        peer: SocketAddr,
        startup: Pass,
        logged_in: Arc<AtomicBool>,
    ) -> Conn {
        Conn {
            shared,
            peer: Some(peer),
            who: None,
            channels: HashMap::new(),
            startup: Some(startup),
            logged_in,
        }
    }

    pub(super) fn known(&self, key: &PublicKey) -> Option<(String, Role)> {
        self.shared.operators().lookup(&fingerprint(key)).cloned()
    }

    /// A shell or exec request on `channel`: who asks and a handle to answer them, or `None`
    /// (refused: nobody logged in, no such channel, or the channel already runs something).
    pub(super) fn begin(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> std::result::Result<Option<(Identity, Handle)>, ConnError> {
        let (Some(who), Some(c)) = (self.who.clone(), self.channels.get_mut(&channel)) else {
            session.channel_failure(channel)?;
            return Ok(None);
        };
        if std::mem::replace(&mut c.started, true) {
            session.channel_failure(channel)?;
            return Ok(None);
        }
        session.channel_success(channel)?;
        Ok(Some((who, session.handle())))
    }

    /// A place among the sessions, or the channel told why not and ended.
    pub(super) fn enter(
        &self,
        who: &Identity,
        input: Option<UnboundedSender<Input>>,
        handle: &Handle,
        channel: ChannelId,
    ) -> Option<SessionGuard> {
        match self.shared.sessions.enter(who, input, self.shared.limits) {
            Ok(guard) => Some(guard),
            Err(full) => {
                tracing::info!(operator = %who.name, why = ?full, "serve: a session refused");
                tokio::spawn(finish(handle.clone(), channel, too_many(&full), 1));
                None
            }
        }
    }
}

/// The handler's error: russh's own (a session's failures are told on its channel).
pub struct ConnError(#[allow(dead_code)] russh::Error);

impl From<russh::Error> for ConnError {
    fn from(e: russh::Error) -> Self {
        ConnError(e)
    }
}

impl russh::server::Handler for Conn {
    type Error = ConnError;

    async fn auth_publickey_offered(
        &mut self,
        _user: &str,
        offer: PublicKeyOffer<'_>,
    ) -> std::result::Result<Auth, Self::Error> {
        // spares the signature of a key that would be refused anyway; decides nothing
        Ok(if self.known(offer.public_key).is_some() {
            Auth::Accept
        } else {
            Auth::reject()
        })
    }

    async fn auth_publickey(
        &mut self,
        user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> std::result::Result<Auth, Self::Error> {
        // the signature is verified: the identity is the key's, whatever the user name says
        let print = fingerprint(key.public_key);
        match self.known(key.public_key) {
            Some((name, role)) => {
                tracing::info!(operator = %name, %role, key = %print, peer = ?self.peer, "serve: logged in");
                crate::listener::Watched::<()>::release(&self.logged_in);
                self.startup = None;
                self.who = Some(Identity {
                    name,
                    role,
                    fingerprint: print,
                });
                Ok(Auth::Accept)
            }
            None => {
                let user = crate::domain::escape_text(user).into_owned();
                tracing::warn!(key = %print, %user, peer = ?self.peer, "serve: unknown key refused");
                Ok(Auth::reject())
            }
        }
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: russh::server::ChannelOpenHandle,
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        // the channel object is dropped: its data comes to `data` below
        self.channels.insert(channel.id(), ChannelState::default());
        reply.accept().await;
        Ok(())
    }

    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        width: u32,
        height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        if let Some(c) = self.channels.get_mut(&channel) {
            c.size = Some(size(width, height));
        }
        session.channel_success(channel)?;
        Ok(())
    }

    async fn env_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        value: &str,
        session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        // NO_COLOR only: the operator comes from the key, never from SETTLE_OPERATOR or the like
        match self.channels.get_mut(&channel) {
            Some(c) if name == "NO_COLOR" => {
                c.no_color = !value.is_empty();
                session.channel_success(channel)?;
            }
            _ => session.channel_failure(channel)?,
        }
        Ok(())
    }

    async fn window_change_request(
        &mut self,
        channel: ChannelId,
        width: u32,
        height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        if let Some(c) = self.channels.get_mut(&channel) {
            let (width, height) = size(width, height);
            c.size = Some((width, height));
            if let Some(tx) = &c.input {
                let _ = tx.send(Input::Resize { width, height });
            }
        }
        Ok(())
    }

    async fn data(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        if let Some(c) = self.channels.get_mut(&channel)
            && let Some(tx) = &c.input
        {
            for k in c.decoder.feed(data) {
                let _ = tx.send(Input::Key(k));
            }
        }
        Ok(())
    }

    async fn channel_eof(
        &mut self,
        channel: ChannelId,
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        if let Some(c) = self.channels.get_mut(&channel) {
            c.input = None;
        }
        Ok(())
    }

    async fn channel_close(
        &mut self,
        channel: ChannelId,
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        self.channels.remove(&channel);
        Ok(())
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        let Some((who, handle)) = self.begin(channel, session)? else {
            return Ok(());
        };
        let Some(c) = self.channels.get(&channel) else {
            return Ok(());
        };
        let no_color = c.no_color;
        let Some((width, height)) = c.size else {
            tokio::spawn(finish(
                handle,
                channel,
                "settle: the console needs a terminal: ssh -t (or run a command: stats, list, show)\r\n".into(),
                1,
            ));
            return Ok(());
        };
        let (tx, rx) = unbounded_channel();
        let Some(guard) = self.enter(&who, Some(tx.clone()), &handle, channel) else {
            return Ok(());
        };
        if let Some(c) = self.channels.get_mut(&channel) {
            c.input = Some(tx);
        }
        let screen = Screen {
            width,
            height,
            no_color,
        };
        tokio::spawn(console(
            self.shared.clone(),
            who,
            handle,
            channel,
            screen,
            rx,
            guard,
        ));
        Ok(())
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        let Some((who, handle)) = self.begin(channel, session)? else {
            return Ok(());
        };
        let Some(guard) = self.enter(&who, None, &handle, channel) else {
            return Ok(());
        };
        let command = String::from_utf8_lossy(data).into_owned();
        let ledger = self.shared.ledger.for_session(who.clone());
        let run = self.shared.exec.clone();
        tokio::spawn(async move {
            let _guard = guard;
            exec(run, ledger, who, command, handle, channel).await;
        });
        Ok(())
    }
}
