//! The communicator list: rebuilt when MPICH's `sequence_number` moves, names refreshed
//! at every display, and each communicator's groups.

use super::groups::RankMap;
use super::*;
use crate::callbacks::ProcessServices;

impl ProcessInfo {
    /// `mqs_update_communicator_list`: starts a display. On failure no list
    /// remains, so no iterator can show a stale one.
    pub(crate) fn update_communicators(&mut self, services: &dyn ProcessServices) -> Result<()> {
        let outcome = self.try_update(services);
        if outcome.is_err() {
            self.comm_sequence = None;
            self.comms.clear();
        }
        outcome
    }

    pub(super) fn try_update(&mut self, services: &dyn ProcessServices) -> Result<()> {
        let (layout, addresses) = self.ready()?;
        let target = Target {
            services,
            sizes: self.sizes,
        };
        self.display = self.display.wrapping_add(1);
        self.operations = None;
        self.comm_cursor = 0;

        let list = &layout.comm_list;
        let span = self
            .sizes
            .span(&[Some(list.sequence_number), Some(list.head)]);
        Self::fetch_block(
            &mut self.scratch,
            &target,
            addresses.all_communicators,
            span,
        )?;
        let block = Block {
            target: &target,
            start: span.0,
            bytes: self.scratch.as_slice(),
        };
        let sequence = block.signed(list.sequence_number)?;
        let head = block.unsigned(list.head)?;

        if self.comm_sequence == Some(sequence) {
            // Unchanged list; MPI_Comm_set_name does not bump the sequence number.
            return self.refresh_names(&target, &layout.comm);
        }
        self.comm_sequence = None;
        self.rebuild(&target, &layout, head)?;
        self.comm_sequence = Some(sequence);
        Ok(())
    }

    pub(super) fn refresh_names(&mut self, target: &Target<'_>, comm: &CommLayout) -> Result<()> {
        let mut name = [0u8; 65];
        for i in 0..self.comms.len() {
            let address = self.comms.as_slice()[i].address;
            let n = (comm.name_len as usize).min(name.len());
            target.fetch(
                offset_address(address, u64::from(comm.name))?,
                &mut name[..n],
            )?;
            self.comms.as_mut_slice()[i].name = communicator_name(&name[..n]);
        }
        Ok(())
    }

    pub(super) fn rebuild(
        &mut self,
        target: &Target<'_>,
        layout: &Layout,
        head: u64,
    ) -> Result<()> {
        self.comms.clear();
        self.ranks.clear();
        self.lpid_cache.clear();
        let comm_layout = &layout.comm;
        let mut fields = [None; 26];
        fields[..12].copy_from_slice(&comm_layout.scalars());
        if let Some(map) = layout.rank_map {
            if let Some(at) = comm_layout.rank_map {
                fields[12..19].copy_from_slice(&map.fields_at(at));
            }
            if let Some(at) = comm_layout.local_rank_map {
                fields[19..26].copy_from_slice(&map.fields_at(at));
            }
        }
        let (start, mut end) = self.sizes.span(&fields);
        end = end.max(comm_layout.name + comm_layout.name_len);
        let span = (start, end);

        let mut guard = ListGuard::new(MAX_COMMUNICATORS);
        let mut address = head;
        while address != 0 {
            guard.visit(address)?;
            Self::fetch_block(&mut self.scratch, target, address, span)?;
            let block = Block {
                target,
                start,
                bytes: self.scratch.as_slice(),
            };
            let c = comm_layout;
            let local_size = block.signed(c.local_size)?;
            let remote_size = c.remote_size.map(|f| block.signed(f)).transpose()?;
            let context_id = block.signed(c.context_id)?;
            let recvcontext_id = block.signed(c.recvcontext_id)?;
            // Without comm_kind: an intracommunicator sends and receives on one context
            // id, an intercommunicator on its own and its peer's (which may coincide).
            let inter = match c.kind {
                Some(kind) => block.signed(kind)? == 1,
                None => context_id != recvcontext_id,
            };
            let sizes_ok = |s: i64| (0..=MAX_RANKS).contains(&s);
            if !sizes_ok(local_size) || !remote_size.is_none_or(sizes_ok) {
                return Err(Error::ImplausibleValue);
            }
            let pointer =
                |f: Option<Field>| -> Result<u64> { f.map_or(Ok(0), |f| block.unsigned(f)) };
            let local_group = pointer(c.local_group)?;
            let remote_group = pointer(c.remote_group)?;
            let vcrt = pointer(c.vcrt)?;
            let local_vcrt = pointer(c.local_vcrt)?;
            let comm = Comm {
                address,
                local_rank: block.signed(c.rank)?,
                size: local_size,
                context_id,
                recvcontext_id,
                inter,
                name: communicator_name(block.raw(c.name, c.name_len)),
                local: GroupSpan::default(),
                remote: GroupSpan::default(),
            };
            let next = block.unsigned(c.next)?;
            let map_at = |at: Option<u32>| -> Result<Option<RankMap>> {
                match (layout.rank_map, at) {
                    (Some(m), Some(at)) => RankMap::decode(&block, &m, at).map(Some),
                    _ => Ok(None),
                }
            };
            let map = map_at(c.rank_map)?;
            let local_map = map_at(c.local_rank_map)?;

            let mut comm = comm;
            comm.local = self.read_group(
                target,
                layout,
                local_group,
                if inter { local_vcrt } else { vcrt },
                local_size,
            )?;
            if !comm.local.known
                && let Some(m) = if inter { local_map } else { map }
            {
                comm.local = self.read_rank_map(target, &m, local_size)?;
            }
            comm.local = self.fallback_group(comm, comm.local, self.global_rank);
            comm.remote = if inter {
                let size = remote_size.unwrap_or(-1);
                let mut remote = self.read_group(target, layout, remote_group, vcrt, size)?;
                if !remote.known
                    && let Some(m) = map
                {
                    remote = self.read_rank_map(target, &m, size)?;
                }
                remote
            } else {
                comm.local
            };
            self.comms.push(comm)?;
            address = next;
        }

        // A debugger that does not know the process's rank: COMM_WORLD tells it,
        // and with it the group of every single-process communicator.
        if self.global_rank < 0
            && let Some(world) = self.comms.as_slice().iter().find(|c| is_world(c)).copied()
        {
            for i in 0..self.comms.len() {
                let c = self.comms.as_slice()[i];
                let local = self.fallback_group(c, c.local, world.local_rank);
                let c = &mut self.comms.as_mut_slice()[i];
                c.local = local;
                if !c.inter {
                    c.remote = local;
                }
            }
        }

        // Stable, readable order: COMM_WORLD (context 0) first.
        self.comms
            .as_mut_slice()
            .sort_unstable_by_key(|c| (c.recvcontext_id, c.address));
        self.by_recvcontext.clear();
        self.by_context.clear();
        for (i, c) in self.comms.as_slice().iter().enumerate() {
            self.by_recvcontext.push((c.recvcontext_id, i as u32))?;
            self.by_context.push((c.context_id, i as u32))?;
        }
        self.by_recvcontext.as_mut_slice().sort_unstable();
        self.by_context.as_mut_slice().sort_unstable();
        Ok(())
    }

    /// COMM_WORLD and single-process communicators need no table to be known.
    pub(super) fn fallback_group(
        &mut self,
        comm: Comm,
        found: GroupSpan,
        world_rank: i64,
    ) -> GroupSpan {
        if found.known || comm.inter {
            return found;
        }
        let start = self.ranks.len() as u32;
        let ok = if is_world(&comm) {
            (0..comm.size).all(|r| self.ranks.push(r as i32).is_ok())
        } else if comm.size == 1 && world_rank >= 0 {
            self.ranks.push(world_rank as i32).is_ok()
        } else {
            return found;
        };
        if !ok {
            return found;
        }
        GroupSpan {
            start,
            len: self.ranks.len() as u32 - start,
            known: true,
        }
    }
}

/// COMM_WORLD: the intracommunicator with context id 0 in every MPICH.
fn is_world(comm: &Comm) -> bool {
    !comm.inter && comm.recvcontext_id == 0 && comm.context_id == 0
}

/// The name as shown: up to 63 bytes, cut at a UTF-8 boundary, NUL-terminated.
pub(super) fn communicator_name(raw: &[u8]) -> [c_char; 64] {
    let mut name = [0 as c_char; 64];
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let mut len = end.min(63);
    if let Err(e) = std::str::from_utf8(&raw[..len])
        && e.error_len().is_none()
    {
        len = e.valid_up_to();
    }
    for (slot, &b) in name.iter_mut().zip(&raw[..len]) {
        *slot = b as c_char;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(name: &[c_char; 64]) -> Vec<u8> {
        name.iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect()
    }

    #[test]
    fn long_names_are_cut_to_63_bytes_with_nul() {
        let long = [b'x'; 128];
        let name = communicator_name(&long);
        assert_eq!(text(&name).len(), 63);
        assert_eq!(name[63], 0);
        assert_eq!(
            text(&communicator_name(b"MPI_COMM_WORLD\0garbage")),
            b"MPI_COMM_WORLD"
        );
    }

    #[test]
    fn names_are_not_cut_inside_a_utf8_character() {
        let mut raw = vec![b'a'; 62];
        raw.extend_from_slice("é".as_bytes());
        raw.push(0);
        assert_eq!(text(&communicator_name(&raw)).len(), 62);
    }
}
