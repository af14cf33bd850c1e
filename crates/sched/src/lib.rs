pub mod fairshare;
