//! The registry of APIs: the `apis!` macro turns the one list in `messages/mod.rs` into
//! [`ApiKey`], and the request and response enums that the broker dispatches on.
//!
//! The list has two parts: Kafka's APIs, and Strata's own, which only Strata nodes send
//! each other (on the controller listener) and which are never advertised to clients.
//! Strata's keys start at [`STRATA_KEYS_FROM`](crate::messages::STRATA_KEYS_FROM), far
//! above Kafka's, and the macro refuses to compile one below it.

/// Builds [`ApiKey`](crate::ApiKey), [`RequestBody`](crate::RequestBody) and
/// [`ResponseBody`](crate::ResponseBody) from the list of APIs.
#[macro_export]
#[doc(hidden)]
macro_rules! apis {
    (
        kafka {
            $($kname:ident = $kkey:literal => $kmodule:ident::{$kreq:ident, $kresp:ident}),* $(,)?
        }
        strata {
            $($sname:ident = $skey:literal => $smodule:ident::{$sreq:ident, $sresp:ident}),* $(,)?
        }
    ) => {
        $crate::apis!(@registry
            $($kname = $kkey => $kmodule::{$kreq, $kresp},)*
            $($sname = $skey => $smodule::{$sreq, $sresp},)*
        );

        // A Strata key in Kafka's range could one day mean a Kafka API to a client.
        const _: () = {
            $(assert!(
                $skey >= $crate::messages::STRATA_KEYS_FROM,
                concat!(stringify!($sname), "'s key is in Kafka's range"),
            );)*
            $(assert!(
                $kkey < $crate::messages::STRATA_KEYS_FROM,
                concat!(stringify!($kname), "'s key is in Strata's range"),
            );)*
        };

        impl ApiKey {
            /// Kafka's APIs, in key order: those a Kafka client may send and that have a
            /// Kafka spec.
            pub const KAFKA: &'static [ApiKey] = &[$(ApiKey::$kname),*];

            /// Strata's own APIs, in key order: sent only between Strata nodes on the
            /// controller listener, never advertised to clients, with no Kafka spec.
            pub const STRATA: &'static [ApiKey] = &[$(ApiKey::$sname),*];

            /// True for Strata's own APIs (see [`ApiKey::STRATA`]).
            pub fn is_strata_private(self) -> bool {
                ApiKey::STRATA.contains(&self)
            }
        }
    };
    (@registry $($name:ident = $key:literal => $module:ident::{$req:ident, $resp:ident}),* $(,)?) => {
        /// An API the codec knows: one of Kafka's, or Strata's own ([`ApiKey::STRATA`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i16)]
        pub enum ApiKey {
            $(
                #[doc = concat!("API key ", stringify!($key), ".")]
                $name = $key,
            )*
        }

        impl ApiKey {
            /// Every known API, Kafka's and Strata's own, in key order.
            pub const ALL: &'static [ApiKey] = &[$(ApiKey::$name),*];

            /// The API for a wire key, if the codec knows it.
            pub fn from_i16(key: i16) -> Option<ApiKey> {
                match key {
                    $($key => Some(ApiKey::$name),)*
                    _ => None,
                }
            }

            /// The API's name as Kafka spells it.
            pub fn name(self) -> &'static str {
                match self { $(ApiKey::$name => stringify!($name),)* }
            }

            /// Lowest and highest version the codec can decode.
            pub fn codec_versions(self) -> (i16, i16) {
                match self { $(ApiKey::$name => $module::VERSIONS,)* }
            }

            /// First version using the flexible encoding (KIP-482).
            pub fn flexible_from(self) -> i16 {
                match self { $(ApiKey::$name => $module::FLEXIBLE_FROM,)* }
            }

            /// The encoding context of `version` of this API.
            pub fn ctx(self, version: i16) -> $crate::codec::Ctx {
                $crate::codec::Ctx::new(version, self.flexible_from())
            }
        }

        /// A decoded request body.
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub enum RequestBody {
            $(
                #[doc = concat!("A ", stringify!($name), " request.")]
                $name($module::$req),
            )*
        }

        impl RequestBody {
            /// Decodes the body of `api` at `version`; the version must be in the codec's
            /// range.
            pub fn decode(
                api: ApiKey,
                version: i16,
                r: &mut $crate::codec::Reader,
            ) -> Result<RequestBody, $crate::codec::DecodeError> {
                let (lo, hi) = api.codec_versions();
                if version < lo || version > hi {
                    return Err($crate::codec::DecodeError::UnsupportedVersion {
                        api_key: api as i16,
                        version,
                    });
                }
                let ctx = api.ctx(version);
                Ok(match api {
                    $(ApiKey::$name => RequestBody::$name(
                        <$module::$req as $crate::codec::Wire>::read(r, ctx)?),)*
                })
            }

            /// Encodes the body at `version` (used by clients and tests).
            pub fn encode(&self, w: &mut $crate::codec::Writer, version: i16) {
                match self {
                    $(RequestBody::$name(m) => $crate::codec::Wire::write(
                        m, w, ApiKey::$name.ctx(version)),)*
                }
            }

            /// The API this body belongs to.
            pub fn api_key(&self) -> ApiKey {
                match self { $(RequestBody::$name(_) => ApiKey::$name,)* }
            }
        }

        /// A response body ready to encode.
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub enum ResponseBody {
            $(
                #[doc = concat!("A ", stringify!($name), " response.")]
                $name($module::$resp),
            )*
        }

        impl ResponseBody {
            /// Encodes the body at `version`.
            pub fn encode(&self, w: &mut $crate::codec::Writer, version: i16) {
                match self {
                    $(ResponseBody::$name(m) => $crate::codec::Wire::write(
                        m, w, ApiKey::$name.ctx(version)),)*
                }
            }

            /// Decodes a response body (used by clients and tests).
            pub fn decode(
                api: ApiKey,
                version: i16,
                r: &mut $crate::codec::Reader,
            ) -> Result<ResponseBody, $crate::codec::DecodeError> {
                let ctx = api.ctx(version);
                Ok(match api {
                    $(ApiKey::$name => ResponseBody::$name(
                        <$module::$resp as $crate::codec::Wire>::read(r, ctx)?),)*
                })
            }

            /// The API this body belongs to.
            pub fn api_key(&self) -> ApiKey {
                match self { $(ResponseBody::$name(_) => ApiKey::$name,)* }
            }
        }

        $(
            impl From<$module::$resp> for ResponseBody {
                fn from(m: $module::$resp) -> ResponseBody {
                    ResponseBody::$name(m)
                }
            }
        )*
    };
}
