pub fn placeholder_build() {}
