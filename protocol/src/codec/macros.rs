//! The `message!` macro: each protocol message is declared once, field by field, with the
//! versions in which each field exists, and gets its struct, `Default` and [`Wire`]
//! implementation from that one declaration.
//!
//! ```text
//! message! {
//!     /// Doc comment of the struct.
//!     pub struct Example {
//!         /// Doc comment of the field.
//!         name: String [0..],              // present in every version
//!         timeout_ms: i32 [1..=4] = 30000,  // versions 1 to 4, default 30000
//!         cluster_id: Option<String> [12..] tag 0,  // tagged field 0 from v12
//!         name: Option<String> [0..] null [10..] = Some(String::new()), // null from v10
//!     }
//! }
//! ```
//!
//! `null [range]` marks a nullable field that Kafka allows to be null only in some of its
//! versions. In the others a null on the wire is refused, as Kafka refuses it, and a
//! `None` is written as empty: Kafka's clients reject a null there, so a handler cannot
//! produce a frame the client cannot parse.
//!
//! Tagged fields are written only when they differ from their default, in the order
//! declared (declare them in ascending tag order). Unknown tags are skipped on read.
//!
//! [`Wire`]: crate::codec::Wire

/// Declares protocol structs; see the module documentation.
#[macro_export]
macro_rules! message {
    ($(
        $(#[$smeta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $field:ident : $ty:ty [$v:expr] $(null [$nv:expr])? $(tag $tag:literal)?
                    $(= $def:expr)?
            ),* $(,)?
        }
    )*) => {$(
        $(#[$smeta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $field: $crate::message!(@default $ty $(, $def)?), )* }
            }
        }

        impl $crate::codec::Wire for $name {
            #[allow(unused_variables, unused_mut)]
            fn read(
                r: &mut $crate::codec::Reader,
                ctx: $crate::codec::Ctx,
            ) -> ::std::result::Result<Self, $crate::codec::DecodeError> {
                let mut s = Self::default();
                $(
                    if $crate::message!(@tag $($tag)?).is_none()
                        && $crate::codec::in_range($v, ctx.version)
                    {
                        s.$field = $crate::message!(@read r, ctx, $ty $(, $nv)?)?;
                    }
                )*
                if ctx.flexible {
                    let count = r.uvarint()?;
                    for _ in 0..count {
                        let tag = r.uvarint()?;
                        let size = r.uvarint()? as usize;
                        let mut sub = $crate::codec::Reader::new(r.take(size, "tagged field")?);
                        $(
                            if $crate::message!(@tag $($tag)?) == Some(tag)
                                && $crate::codec::in_range($v, ctx.version)
                            {
                                s.$field = <$ty as $crate::codec::Wire>::read(&mut sub, ctx)?;
                            }
                        )*
                    }
                }
                Ok(s)
            }

            #[allow(unused_variables, unused_mut)]
            fn write(&self, w: &mut $crate::codec::Writer, ctx: $crate::codec::Ctx) {
                $(
                    if $crate::message!(@tag $($tag)?).is_none()
                        && $crate::codec::in_range($v, ctx.version)
                    {
                        $crate::message!(@write w, ctx, &self.$field $(, $nv)?);
                    }
                )*
                if ctx.flexible {
                    let mut count: u32 = 0;
                    $(
                        if $crate::message!(@tag $($tag)?).is_some()
                            && $crate::codec::in_range($v, ctx.version)
                            && self.$field != $crate::message!(@default $ty $(, $def)?)
                        {
                            count += 1;
                        }
                    )*
                    w.uvarint(count);
                    $(
                        if let Some(tag) = $crate::message!(@tag $($tag)?) {
                            if $crate::codec::in_range($v, ctx.version)
                                && self.$field != $crate::message!(@default $ty $(, $def)?)
                            {
                                let mut sub = $crate::codec::Writer::new();
                                $crate::codec::Wire::write(&self.$field, &mut sub, ctx);
                                let body = sub.into_memory_bytes();
                                w.uvarint(tag);
                                w.uvarint(body.len() as u32);
                                w.put_bytes(&body);
                            }
                        }
                    )*
                }
            }
        }
    )*};
    (@read $r:ident, $ctx:ident, $ty:ty) => {
        <$ty as $crate::codec::Wire>::read($r, $ctx)
    };
    (@read $r:ident, $ctx:ident, $ty:ty, $nv:expr) => {
        if $crate::codec::in_range($nv, $ctx.version) {
            <$ty as $crate::codec::Wire>::read($r, $ctx)
        } else {
            <$ty as $crate::codec::NonNull>::read_non_null($r, $ctx)
        }
    };
    (@write $w:ident, $ctx:ident, $val:expr) => {
        $crate::codec::Wire::write($val, $w, $ctx)
    };
    (@write $w:ident, $ctx:ident, $val:expr, $nv:expr) => {
        if $crate::codec::in_range($nv, $ctx.version) {
            $crate::codec::Wire::write($val, $w, $ctx)
        } else {
            $crate::codec::NonNull::write_non_null($val, $w, $ctx)
        }
    };
    (@default $ty:ty) => { <$ty as ::std::default::Default>::default() };
    (@default $ty:ty, $def:expr) => { $def };
    (@tag) => { ::std::option::Option::<u32>::None };
    (@tag $t:literal) => { ::std::option::Option::<u32>::Some($t) };
}
