//! Fail closed on security settings. Strata implements neither TLS, nor SASL, nor ACLs yet:
//! a configuration that asks for any of them (a listener whose security protocol is not
//! PLAINTEXT, or one of Kafka's `ssl.*`, `sasl.*`, authorizer or principal keys) stops the
//! broker at start-up with an error naming the key. Warning and serving anyway would leave
//! an operator who believes the cluster is secured with plaintext, unauthenticated ports.
//!
//! Key names are Kafka's (`SslConfigs`, `SaslConfigs`, `BrokerSecurityConfigs`, the
//! authorizer's and `KafkaConfig`'s security keys), with the `listener.name.<listener>.`
//! prefixed forms a listener may set for itself.

use super::cluster::ClusterConfig;
use super::{ConfigError, Listener, Parser};
use std::collections::BTreeMap;

/// Prefixes of Kafka's security keys: TLS (`ssl.keystore.location`, `ssl.client.auth`,
/// `ssl.principal.mapping.rules`, ...), SASL (`sasl.enabled.mechanisms`, `sasl.jaas.config`,
/// `sasl.mechanism.inter.broker.protocol`, `sasl.mechanism.controller.protocol`,
/// `sasl.kerberos.*`, `sasl.oauthbearer.*`, ...) and delegation tokens.
const SECURITY_PREFIXES: &[&str] = &["ssl.", "sasl.", "delegation.token."];

/// Kafka's security keys outside those prefixes: the authorizer and its settings, how a
/// principal is built, re-authentication (KIP-368) and the JCA providers TLS and SASL use.
const SECURITY_KEYS: &[&str] = &[
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "principal.builder.class",
    "connections.max.reauth.ms",
    "security.providers",
];

/// Where a listener's security protocol is set (Kafka's `listener.security.protocol.map`).
pub const PROTOCOL_MAP_KEY: &str = "listener.security.protocol.map";

/// Kafka's default `listener.security.protocol.map`: each protocol's own name maps to it.
const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// The protocol of broker-to-broker connections when no inter-broker listener is named.
const INTER_BROKER_PROTOCOL_KEY: &str = "security.inter.broker.protocol";

/// The security protocols Kafka knows (`SecurityProtocol`); only PLAINTEXT is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// No encryption, no authentication: what every Strata listener serves.
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL authentication over plaintext.
    SaslPlaintext,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// The protocol named `name`, in any case (as Kafka reads it).
    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    /// Kafka's name of the protocol.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// True if `name` is one of Kafka's security keys (TLS, SASL, authorizer, principal
/// mapping, delegation tokens), bare or prefixed for one listener
/// (`listener.name.<listener>.ssl.keystore.location`,
/// `listener.name.<listener>.<mechanism>.sasl.jaas.config`). Such a key can be neither set
/// at start-up nor changed at run time until Strata implements what it configures.
pub fn is_security_key(name: &str) -> bool {
    if is_bare_security_key(name) {
        return true;
    }
    let Some(rest) = name.strip_prefix("listener.name.") else { return false };
    let Some((_listener, key)) = rest.split_once('.') else { return false };
    // A SASL mechanism's own settings: `<mechanism>.sasl.jaas.config`, `.sasl.login.*`, ...
    is_bare_security_key(key) || key.split_once('.').is_some_and(|(_mechanism, k)| k.starts_with("sasl."))
}

fn is_bare_security_key(name: &str) -> bool {
    SECURITY_PREFIXES.iter().any(|p| name.starts_with(p)) || SECURITY_KEYS.contains(&name)
}

/// What every refusal adds: why the broker stops instead of serving.
fn refusal(what: String) -> String {
    format!(
        "{what}; TLS, SASL and ACLs are not supported yet, so the broker refuses to start rather than \
         serve unencrypted, unauthenticated connections"
    )
}

/// Refuses a configuration that sets any security key (an empty value is unset, as Kafka
/// reads it). The error names the first key and lists the others, never their values,
/// which may be passwords (`ssl.keystore.password`, `sasl.jaas.config`).
pub(super) fn check_keys(raw: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    let mut set = raw.iter().filter(|(k, v)| !v.trim().is_empty() && is_security_key(k)).map(|(k, _)| k);
    let Some(first) = set.next() else { return Ok(()) };
    let others: Vec<&str> = set.map(String::as_str).collect();
    let also = if others.is_empty() { String::new() } else { format!(" (also set: {})", others.join(", ")) };
    Err(ConfigError::Unsupported {
        key: first.clone(),
        reason: refusal(format!("a security setting is given{also}")),
    })
}

/// `listener.security.protocol.map`, with Strata's reading of a listener it leaves out.
struct ProtocolMap {
    /// Listener name (upper case, as Kafka normalises it) to protocol.
    entries: Vec<(String, SecurityProtocol)>,
}

impl ProtocolMap {
    fn parse(p: &Parser<'_>, text: &str) -> Result<ProtocolMap, ConfigError> {
        let mut entries: Vec<(String, SecurityProtocol)> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, protocol) = item
                .split_once(':')
                .ok_or_else(|| p.invalid(PROTOCOL_MAP_KEY, "expected LISTENER:PROTOCOL,..."))?;
            let name = name.trim().to_ascii_uppercase();
            let protocol = SecurityProtocol::parse(protocol).ok_or_else(|| {
                p.invalid(
                    PROTOCOL_MAP_KEY,
                    &format!(
                        "unknown security protocol {:?} for listener {name} \
                         (Kafka's are PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
                        protocol.trim()
                    ),
                )
            })?;
            if name.is_empty() || entries.iter().any(|(n, _)| *n == name) {
                return Err(
                    p.invalid(PROTOCOL_MAP_KEY, &format!("listener {name:?} is mapped more than once"))
                );
            }
            entries.push((name, protocol));
        }
        Ok(ProtocolMap { entries })
    }

    /// The protocol of listener `name`: its entry in the map; else the protocol the name
    /// spells (`SSL://...` is TLS, as in Kafka's default map); else PLAINTEXT. Kafka refuses
    /// a custom name missing from the map; Strata has always served one in plaintext, which
    /// asks for no security, so it still does.
    fn resolve(&self, name: &str) -> (SecurityProtocol, bool) {
        let upper = name.trim().to_ascii_uppercase();
        match self.entries.iter().find(|(n, _)| *n == upper) {
            Some((_, protocol)) => (*protocol, true),
            None => (SecurityProtocol::parse(&upper).unwrap_or(SecurityProtocol::Plaintext), false),
        }
    }
}

/// Refuses a listener whose security protocol is not PLAINTEXT: in `listeners`,
/// `advertised.listeners`, `controller.listener.names` and the inter-broker listener
/// (`inter.broker.listener.name` or `security.inter.broker.protocol`), each resolved
/// through `listener.security.protocol.map`. An unknown protocol in the map is refused too.
pub(super) fn check_listeners(
    p: &mut Parser<'_>,
    listeners: &[Listener],
    advertised: &[Listener],
    cluster: &ClusterConfig,
) -> Result<(), ConfigError> {
    let map_text = p.string(PROTOCOL_MAP_KEY, DEFAULT_PROTOCOL_MAP);
    let map = ProtocolMap::parse(p, &map_text)?;
    let refuse = |key: &str, what: &str, name: &str| -> Result<(), ConfigError> {
        match map.resolve(name) {
            (SecurityProtocol::Plaintext, _) => Ok(()),
            (protocol, mapped) => {
                let via = if mapped { format!(" (by {PROTOCOL_MAP_KEY})") } else { String::new() };
                Err(ConfigError::Unsupported {
                    key: key.into(),
                    reason: refusal(format!("{what} uses security protocol {}{via}", protocol.name())),
                })
            }
        }
    };
    for (key, list) in [("listeners", listeners), ("advertised.listeners", advertised)] {
        for l in list {
            refuse(key, &format!("listener {}://{}:{}", l.name, l.host, l.port), &l.name)?;
        }
    }
    for name in &cluster.controller_listener_names {
        refuse("controller.listener.names", &format!("controller listener {name}"), name)?;
    }
    let name = &cluster.inter_broker_listener_name;
    refuse("inter.broker.listener.name", &format!("inter-broker listener {name}"), name)?;
    let inter_broker = p.string(INTER_BROKER_PROTOCOL_KEY, "PLAINTEXT");
    if !inter_broker.trim().is_empty() {
        match SecurityProtocol::parse(&inter_broker) {
            Some(SecurityProtocol::Plaintext) => {}
            Some(protocol) => {
                return Err(ConfigError::Unsupported {
                    key: INTER_BROKER_PROTOCOL_KEY.into(),
                    reason: refusal(format!("the inter-broker security protocol is {}", protocol.name())),
                })
            }
            None => {
                return Err(p.invalid(
                    INTER_BROKER_PROTOCOL_KEY,
                    "unknown security protocol (Kafka's are PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::map;
    use super::super::BrokerConfig;
    use super::*;

    /// The error of starting with `pairs`, as the binary prints it.
    fn refusal_of(pairs: &[(&str, &str)]) -> String {
        match BrokerConfig::from_map(map(pairs)) {
            Ok(_) => panic!("{pairs:?} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    fn assert_refused(pairs: &[(&str, &str)], names: &[&str]) {
        let e = refusal_of(pairs);
        assert!(e.contains("not supported yet"), "{pairs:?}: {e}");
        for name in names {
            assert!(e.contains(name), "{pairs:?}: {name} not named in {e}");
        }
    }

    #[test]
    fn a_listener_written_with_a_security_protocol_is_refused() {
        for (listener, protocol) in [
            ("SSL://127.0.0.1:9094", "SSL"),
            ("SASL_PLAINTEXT://127.0.0.1:9093", "SASL_PLAINTEXT"),
            ("sasl_ssl://127.0.0.1:9095", "SASL_SSL"),
        ] {
            let listeners = format!("PLAINTEXT://127.0.0.1:9092,{listener}");
            assert_refused(&[("listeners", &listeners)], &["listeners", listener, protocol]);
        }
        // Advertised only: clients would be told to speak TLS to a plaintext port.
        assert_refused(&[("advertised.listeners", "SSL://broker:9094")], &["advertised.listeners", "SSL"]);
    }

    #[test]
    fn a_custom_listener_mapped_to_a_security_protocol_is_refused() {
        assert_refused(
            &[
                ("listeners", "PLAINTEXT://127.0.0.1:9092,CLIENT://127.0.0.1:9093"),
                (PROTOCOL_MAP_KEY, "PLAINTEXT:PLAINTEXT,client:SASL_SSL"),
            ],
            &["listeners", "CLIENT://127.0.0.1:9093", "SASL_SSL", PROTOCOL_MAP_KEY],
        );
        // A name that spells a protocol but is left out of the map keeps that protocol.
        assert_refused(
            &[("listeners", "SSL://127.0.0.1:9094"), (PROTOCOL_MAP_KEY, "PLAINTEXT:PLAINTEXT")],
            &["SSL://127.0.0.1:9094"],
        );
        let e = refusal_of(&[(PROTOCOL_MAP_KEY, "PLAINTEXT:TLS")]);
        assert!(e.contains(PROTOCOL_MAP_KEY) && e.contains("TLS"), "{e}");
        let e = refusal_of(&[(PROTOCOL_MAP_KEY, "PLAINTEXT")]);
        assert!(e.contains(PROTOCOL_MAP_KEY), "{e}");
    }

    #[test]
    fn the_controller_and_inter_broker_listeners_must_be_plaintext() {
        let kraft = [
            ("process.roles", "broker,controller"),
            ("node.id", "1"),
            ("controller.quorum.voters", "1@127.0.0.1:9093"),
            ("controller.listener.names", "CONTROLLER"),
            ("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,INTERNAL://127.0.0.1:9094"),
            ("inter.broker.listener.name", "INTERNAL"),
        ];
        let with = |map_value: &'static str| {
            let mut pairs = kraft.to_vec();
            pairs.push((PROTOCOL_MAP_KEY, map_value));
            pairs
        };
        assert_refused(
            &with("PLAINTEXT:PLAINTEXT,CONTROLLER:SSL,INTERNAL:PLAINTEXT"),
            &["CONTROLLER", "SSL"],
        );
        assert_refused(
            &with("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:SASL_PLAINTEXT"),
            &["INTERNAL", "SASL_PLAINTEXT"],
        );
        // A broker-only node reaches the controllers over controller.listener.names.
        assert_refused(
            &[
                ("process.roles", "broker"),
                ("node.id", "2"),
                ("controller.quorum.voters", "1@127.0.0.1:9093"),
                ("controller.listener.names", "CONTROLLER"),
                (PROTOCOL_MAP_KEY, "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"),
            ],
            &["controller.listener.names", "controller listener CONTROLLER", "SASL_SSL"],
        );
        assert_refused(
            &[("security.inter.broker.protocol", "SSL")],
            &["security.inter.broker.protocol", "SSL"],
        );
        let e = refusal_of(&[("security.inter.broker.protocol", "TLS")]);
        assert!(e.contains("security.inter.broker.protocol") && e.contains("unknown"), "{e}");
        // Plaintext under custom names, as the interop cluster runs, still starts.
        let c =
            BrokerConfig::from_map(map(&with("PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT")))
                .unwrap();
        assert_eq!(c.cluster.inter_broker_listener_name, "INTERNAL");
        let mut unmapped = kraft.to_vec();
        unmapped.push(("security.inter.broker.protocol", "plaintext"));
        BrokerConfig::from_map(map(&unmapped)).expect("custom names left out of the map are plaintext");
    }

    #[test]
    fn security_keys_are_refused_naming_the_key_but_not_its_value() {
        for key in [
            "ssl.keystore.location",
            "ssl.principal.mapping.rules",
            "sasl.enabled.mechanisms",
            "sasl.mechanism.inter.broker.protocol",
            "sasl.mechanism.controller.protocol",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms",
            "listener.name.ssl.ssl.keystore.password",
            "authorizer.class.name",
            "super.users",
            "allow.everyone.if.no.acl.found",
            "principal.builder.class",
            "connections.max.reauth.ms",
            "delegation.token.secret.key",
        ] {
            let e = refusal_of(&[(key, "s3cret-value")]);
            assert!(e.contains(key) && e.contains("not supported yet"), "{key}: {e}");
            assert!(!e.contains("s3cret-value"), "{key}: the value may be a password: {e}");
        }
        let e = refusal_of(&[("super.users", "User:admin"), ("ssl.keystore.location", "/k.jks")]);
        assert!(e.contains("ssl.keystore.location") && e.contains("also set: super.users"), "{e}");
    }

    #[test]
    fn empty_security_keys_and_plaintext_settings_are_accepted() {
        let c = BrokerConfig::from_map(map(&[
            ("authorizer.class.name", ""),
            ("super.users", " "),
            ("listeners", "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093"),
            (PROTOCOL_MAP_KEY, "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,SSL:SSL"),
            ("security.inter.broker.protocol", "PLAINTEXT"),
            ("listener.name.internal.max.connections", "5"),
        ]))
        .unwrap();
        assert_eq!(c.listeners.len(), 2);
        assert_eq!(c.connections.per_listener.get("internal"), Some(&5));
    }

    #[test]
    fn security_keys_are_told_from_their_neighbours() {
        for key in ["listener.name.client.scram-sha-256.sasl.jaas.config", "sasl.jaas.config"] {
            assert!(is_security_key(key), "{key}");
        }
        for key in [
            "listener.name.plaintext.max.connections",
            "listener.security.protocol.map",
            "connections.max.idle.ms",
            "security.inter.broker.protocol",
            "listeners",
            "inter.broker.listener.name",
        ] {
            assert!(!is_security_key(key), "{key}");
        }
    }
}
