package lua

import (
	"fmt"
	"time"
)

// Reload reads the scripts again and, if they changed, builds a new state
// from them and makes it current; batches in flight finish on the old
// state. On error the previous scripts stay in use.
func (s *Source) Reload() error {
	files, hash, err := readScripts(s.path)
	if err != nil {
		return s.reloaded(fmt.Errorf("lua source %q: reload: %w", s.name, err))
	}
	s.mu.Lock()
	same := hash == s.hash
	s.hash = hash
	s.mu.Unlock()
	if same {
		return nil
	}
	scripts, err := compileScripts(files, hash)
	if err != nil {
		return s.reloaded(fmt.Errorf("lua source %q: reload: %w", s.name, err))
	}
	r, err := s.newRunner(scripts)
	if err != nil {
		return s.reloaded(fmt.Errorf("lua source %q: reload: %w", s.name, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		r.L.Close()
		return nil
	}
	s.installLocked(r)
	s.log.Info("Lua scripts reloaded", "tools", len(r.decls))
	return s.reloaded(nil)
}

func (s *Source) reloaded(err error) error {
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.opts.Metrics.reloads.WithLabelValues(s.name, result).Inc()
	return err
}

// watch reloads the scripts when they change, checking every interval.
func (s *Source) watch(interval time.Duration) {
	defer close(s.watchDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := s.Reload(); err != nil {
				s.log.Error("reload Lua scripts; keeping the previous ones", "err", err)
			}
		case <-s.stopWatch:
			return
		}
	}
}
